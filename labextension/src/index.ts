/**
 * shadowkernel-timeline: renders `application/vnd.shadowkernel.timeline+json`, the
 * interleaving of agent branches on a shadow workspace, as a zoomable timeline.
 */
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';

import { MIME_TYPE } from './layout';
import { TimelineRenderer } from './widget';

export { MIME_TYPE } from './layout';
export { TimelineRenderer } from './widget';

/** Safe: the view writes data only as text and attributes, so untrusted (saved,
 * unsigned) notebooks render their timelines too. */
export const rendererFactory: IRenderMime.IRendererFactory = {
  safe: true,
  mimeTypes: [MIME_TYPE],
  createRenderer: options => new TimelineRenderer(options)
};

const extension: IRenderMime.IExtension = {
  id: 'shadowkernel-timeline:renderer',
  description: 'Shows how agent branches take turns on a shadowkernel shadow workspace.',
  rendererFactory,
  rank: 0,
  dataType: 'json'
};

export default extension;
