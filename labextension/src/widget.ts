/**
 * The MIME renderer: one small class that hands the bundle to the view.
 */
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Widget } from '@lumino/widgets';

import { parseTimeline, TimelineDataError } from './layout';
import { TimelineView } from './view';

export class TimelineRenderer extends Widget implements IRenderMime.IRenderer {
  constructor(options: IRenderMime.IRendererOptions) {
    super();
    this.mimeType = options.mimeType;
    this.addClass('sk-TimelineRenderer');
    this.node.appendChild(this.view.node);
  }

  /**
   * Called once per output, and again on the same widget for each
   * `update_display`: the view keeps its zoom, pan, focus and tooltip.
   */
  renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    try {
      this.view.show(parseTimeline(model.data[this.mimeType]));
    } catch (error) {
      if (!(error instanceof TimelineDataError)) {
        throw error;
      }
      this.view.showError(error.message);
    }
    return Promise.resolve();
  }

  override dispose(): void {
    this.view.dispose();
    super.dispose();
  }

  private readonly mimeType: string;
  private readonly view = new TimelineView();
}
