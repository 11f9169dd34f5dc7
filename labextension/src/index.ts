/**
 * shadowkernel-timeline: renders `application/vnd.shadowkernel.timeline+json`, the
 * interleaving of agent branches on a shadow workspace, as a zoomable timeline.
 *
 * A plugin rather than a plain mime extension because a live timeline needs the kernel of
 * the notebook its output lives in: as ipywidgets does, a document widget extension gives
 * each notebook's own rendermime registry a factory bound to that notebook's session. The
 * global registry gets a factory without a session, for outputs shown anywhere else.
 */
import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { ISessionContext } from '@jupyterlab/apputils';
import { NotebookPanel } from '@jupyterlab/notebook';
import { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';

import { MIME_TYPE } from './layout';
import { TimelineRenderer } from './widget';

export { MIME_TYPE } from './layout';
export { TimelineRenderer } from './widget';

const RANK = 0;

/** Safe: the view writes data only as text and attributes, so untrusted (saved,
 * unsigned) notebooks render their timelines too. */
export function rendererFactory(session: ISessionContext | null): IRenderMime.IRendererFactory {
  return {
    safe: true,
    mimeTypes: [MIME_TYPE],
    defaultRank: RANK,
    createRenderer: options => new TimelineRenderer(options, session)
  };
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'shadowkernel-timeline:renderer',
  description: 'Shows how agent branches take turns on a shadowkernel shadow workspace, live.',
  autoStart: true,
  requires: [IRenderMimeRegistry],
  activate: (app: JupyterFrontEnd, rendermime: IRenderMimeRegistry) => {
    rendermime.addFactory(rendererFactory(null), RANK);
    app.docRegistry.addWidgetExtension('Notebook', {
      createNew: (panel: NotebookPanel) => {
        panel.content.rendermime.addFactory(rendererFactory(panel.sessionContext), RANK);
      }
    });
  }
};

export default plugin;
