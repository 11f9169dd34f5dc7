/**
 * The MIME renderer: hands the bundle to the view, and, when the bundle names a live feed
 * and the output lives in a notebook with a kernel, keeps the view following that feed.
 */
import { ISessionContext } from '@jupyterlab/apputils';
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Widget } from '@lumino/widgets';

import { TimelineDataError } from './layout';
import { Connection, FeedClient } from './feed';
import { fromBundle, LiveState, merge, parseLive } from './live';
import { TimelineView } from './view';

const STATUS: Record<Connection, string> = {
  connecting: 'connecting to the kernel…',
  live: 'live',
  'no kernel': 'no kernel: showing the saved state',
  'kernel restarted': 'kernel restarted: showing the last state',
  'kernel stopped': 'kernel stopped: showing the last state',
  'shadow closed': 'shadow closed: showing the last state'
};

/** The status while the running cell updates the view (its comm waits for the kernel). */
export const FOLLOWING = 'live: the cell follows the agents';

export class TimelineRenderer extends Widget implements IRenderMime.IRenderer {
  constructor(
    options: IRenderMime.IRendererOptions,
    private readonly session: ISessionContext | null = null
  ) {
    super();
    this.mimeType = options.mimeType;
    this.addClass('sk-TimelineRenderer');
    this.node.appendChild(this.view.node);
  }

  /**
   * Called once per output, and again on the same widget for each
   * `update_display`: the view keeps its zoom, pan, focus and tooltip. An update older
   * than what the feed already brought is ignored.
   */
  renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    const data = model.data[this.mimeType];
    this.guard(() => {
      const state = fromBundle(data);
      const grew = this.state !== null && state.seq > this.state.seq;
      if (!this.state || state.seq >= this.state.seq) {
        this.showState(state);
      }
      this.follow(parseLive(data));
      // An update_display of the running `%timeline` cell: the view is live through the
      // cell, while the comm waits for the busy kernel (it said "connecting" for as long
      // as the cell followed the agents).
      if (grew && this.feed && !this.feed.isLive) {
        this.view.setStatus(FOLLOWING, true);
      }
    });
    return Promise.resolve();
  }

  override dispose(): void {
    this.feed?.dispose();
    this.view.dispose();
    super.dispose();
  }

  private follow(live: ReturnType<typeof parseLive>): void {
    if (!live || this.feed) {
      return;
    }
    if (!this.session) {
      this.view.setStatus(STATUS['no kernel']);
      return;
    }
    const feed = new FeedClient(this.session, live, {
      onFeed: message => this.guard(() => this.onFeed(message)),
      onConnection: connection => this.view.setStatus(STATUS[connection], connection === 'live')
    });
    this.feed = feed;
    this.view.diffSource = (branch, version) => feed.diff(branch, version);
  }

  private onFeed(message: unknown): void {
    if (!this.state) {
      return;
    }
    const result = merge(this.state, message);
    if (result.kind === 'resync') {
      this.feed?.resync();
    } else if (result.kind === 'updated') {
      this.showState(result.state);
    }
  }

  private showState(state: LiveState): void {
    this.state = state;
    this.view.show(state.timeline);
  }

  /** A bundle or message that breaks the contract shows its message instead of throwing. */
  private guard(action: () => void): void {
    try {
      action();
    } catch (error) {
      if (!(error instanceof TimelineDataError)) {
        throw error;
      }
      this.view.showError(error.message);
    }
  }

  private readonly mimeType: string;
  private readonly view = new TimelineView();
  private state: LiveState | null = null;
  private feed: FeedClient | null = null;
}
