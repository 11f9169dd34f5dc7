/**
 * The adapter between a timeline view and the kernel: a comm on the feed named by the
 * bundle, opened through the session of the notebook the output lives in. It reopens the
 * comm when the session gets another kernel or the kernel restarts (a page reload builds
 * a new renderer, which subscribes again), and reports how the connection stands. All
 * merging is in live.ts; this module only moves messages.
 */
import { ISessionContext } from '@jupyterlab/apputils';
import { Kernel } from '@jupyterlab/services';

import { LiveInfo } from './live';

/** How the live view stands, shown in its header. */
export type Connection = 'connecting' | 'live' | 'no kernel' | 'kernel restarted' | 'kernel stopped' | 'shadow closed';

export interface FeedListener {
  /** A snapshot or new events, as JSON. */
  onFeed(message: unknown): void;
  onConnection(connection: Connection): void;
}

export class FeedClient {
  constructor(
    private readonly session: ISessionContext,
    private readonly live: LiveInfo,
    private readonly listener: FeedListener
  ) {
    session.kernelChanged.connect(this.onKernelChanged, this);
    session.statusChanged.connect(this.onStatus, this);
    void session.ready.then(() => this.connect());
  }

  /** Ask for a snapshot: the view missed a message. */
  resync(): void {
    this.comm?.send({ type: 'resync' });
  }

  /** The version's diff against the branch's base, from the kernel. */
  diff(branch: string, version: number): Promise<string> {
    if (!this.comm || this.connection !== 'live') {
      return Promise.reject(new Error(`the kernel is not live (${this.connection})`));
    }
    return new Promise(resolve => {
      this.pendingDiffs.push({ branch, version, resolve });
      this.comm!.send({ type: 'diff', branch, version });
    });
  }

  get isLive(): boolean {
    return this.connection === 'live';
  }

  dispose(): void {
    this.session.kernelChanged.disconnect(this.onKernelChanged, this);
    this.session.statusChanged.disconnect(this.onStatus, this);
    this.closeComm();
  }

  private connect(): void {
    this.closeComm();
    const kernel = this.session.session?.kernel;
    if (!kernel) {
      this.report(this.everLive ? 'kernel stopped' : 'no kernel');
      return;
    }
    this.report('connecting');
    const comm = kernel.createComm(this.live.target);
    comm.onMsg = msg => this.onMessage(msg.content.data);
    // A kernel without the target (another kernel, or one that restarted without the
    // shadowkernel extension) closes the comm at once: the feed is gone.
    comm.onClose = () => {
      if (this.comm === comm) {
        this.comm = null;
        this.report(this.connection === 'shadow closed' ? 'shadow closed' : 'kernel restarted');
      }
    };
    this.comm = comm;
    comm.open({ feed: this.live.feed });
  }

  private onMessage(data: unknown): void {
    const message = data as { type?: string; diff?: string; branch?: string; version?: number };
    switch (message.type) {
      case 'gone':
        this.report('kernel restarted');
        return;
      case 'closed':
        this.report('shadow closed');
        return;
      case 'diff': {
        const index = this.pendingDiffs.findIndex(p => p.branch === message.branch && p.version === message.version);
        const [pending] = index >= 0 ? this.pendingDiffs.splice(index, 1) : [];
        pending?.resolve(message.diff ?? '');
        return;
      }
      case 'snapshot':
        this.everLive = true;
        this.report('live');
        break;
    }
    this.listener.onFeed(data);
  }

  private onKernelChanged(): void {
    void this.session.ready.then(() => this.connect());
  }

  /** A restart keeps the kernel object: reconnect once it is idle again. */
  private onStatus(_: ISessionContext, status: Kernel.Status): void {
    if (status === 'dead' || status === 'restarting' || status === 'autorestarting') {
      this.closeComm();
      this.report(status === 'dead' ? 'kernel stopped' : 'kernel restarted');
      this.awaitingRestart = status !== 'dead';
    } else if (status === 'idle' && this.awaitingRestart) {
      this.awaitingRestart = false;
      this.connect();
    }
  }

  private closeComm(): void {
    const comm = this.comm;
    this.comm = null;
    if (comm && !comm.isDisposed) {
      try {
        comm.close();
      } catch {
        // the kernel is already gone: nothing to tell it
      }
    }
  }

  private report(connection: Connection): void {
    if (connection !== this.connection) {
      this.connection = connection;
      this.listener.onConnection(connection);
    }
  }

  private comm: Kernel.IComm | null = null;
  private connection: Connection | null = null;
  private everLive = false;
  private awaitingRestart = false;
  private readonly pendingDiffs: { branch: string; version: number; resolve: (diff: string) => void }[] = [];
}
