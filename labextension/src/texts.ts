/**
 * Every text the timeline shows, as plain data: the tooltip (which is also each bar's
 * accessible name), the summary, the request panel's rows, durations and labels. The kernel
 * writes the same texts (sched/timeline.py: `Event.describe`, `Event.rows`,
 * `Summary.lines`); tests/fixtures/timeline_contract.json holds what both must produce.
 */
import { OUTSIDE, type Summary, type TimelineEvent } from './layout';

/** A duration in milliseconds with precision that suits its size. */
export function formatMs(seconds: number): string {
  const ms = seconds * 1000;
  const digits = Math.abs(ms) < 10 ? 2 : Math.abs(ms) < 1000 ? 1 : 0;
  return `${ms.toFixed(digits)} ms`;
}

/** A moment (seconds since the workspace started): in ms under a second, else in s. */
export function formatTime(seconds: number): string {
  return seconds < 1 ? formatMs(seconds) : `${seconds.toFixed(3)} s`;
}

/** The branch, and the client that asked when it was not the notebook itself. */
export function who(e: TimelineEvent): string {
  return e.client ? `${e.branch} (${e.client})` : e.branch;
}

function opText(e: TimelineEvent): string {
  return e.op === e.kind ? e.op : `${e.op} (${e.kind})`;
}

/**
 * What the tooltip shows, one line each; joined, the same text is the bar's
 * aria-label, so keyboard and screen-reader users get what the pointer shows.
 */
export function describeEvent(e: TimelineEvent, showLane = false): string[] {
  const head = [`branch ${who(e)}`, `version ${e.version}`, opText(e)];
  if (showLane || e.lane === OUTSIDE) {
    head.push(e.lane === OUTSIDE ? 'in a view of its own' : `shadow ${e.lane}`);
  }
  const lines = [
    head.join(' · '),
    `waited ${formatMs(e.started - e.queued)} · switch ${formatMs(e.switch)} · ` +
      `served ${formatMs(e.finished - e.started - e.switch)}`,
    `queued at ${formatTime(e.queued)}, finished at ${formatTime(e.finished)}`
  ];
  const outcome = [e.ok ? '' : 'failed', e.outcome].filter(Boolean).join(': ');
  if (outcome) {
    lines.push(outcome);
  }
  return lines;
}

export function ariaLabel(lines: readonly string[]): string {
  return lines.join('. ');
}

/** The summary under the title: requests and switches, switching vs serving, waits. */
export function summaryLines(summary: Summary): string[] {
  const serving = Math.max(0, summary.serve_time - summary.switch_time);
  const share = summary.serve_time > 0 ? (100 * summary.switch_time) / summary.serve_time : 0;
  const waits = Object.entries(summary.branches)
    .map(([branch, b]) => `${branch} ${formatMs(b.mean_wait)} (${plural(b.requests, 'request')})`)
    .join(' · ');
  return [
    `${plural(summary.events, 'request')} · ${plural(summary.switches, 'switch', 'switches')}`,
    `switching ${formatMs(summary.switch_time)} vs serving ${formatMs(serving)} ` +
      `(${share.toFixed(1)}% of busy time)`,
    `mean wait: ${waits || 'none yet'}`
  ];
}

export function plural(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}

/** Keep long branch names inside the label column. */
export function truncateLabel(label: string, maxChars: number): string {
  return label.length <= maxChars ? label : `${label.slice(0, Math.max(1, maxChars - 1))}…`;
}

/** The request panel's rows: what a bar's request was, how long each part took, what it
 * answered. */
export function requestRows(e: TimelineEvent): [string, string][] {
  const answer = [
    e.lints !== undefined ? plural(e.lints, 'lint') : '',
    e.new_lints !== undefined ? `${e.new_lints} new` : '',
    e.exit_code !== undefined ? `exit code ${e.exit_code}` : ''
  ].filter(Boolean);
  const answerText = answer.join(', ') || e.outcome || 'none';
  return [
    ['branch', e.branch],
    ...(e.client ? [['asked by', e.client] as [string, string]] : []),
    ['version', String(e.version)],
    ['kind', opText(e)],
    ['shadow', e.lane === OUTSIDE ? 'none, in a view of its own' : String(e.lane)],
    ['queue wait', formatMs(e.started - e.queued)],
    ['switch', formatMs(e.switch)],
    ['serve', formatMs(e.finished - e.started - e.switch)],
    ['answer', e.ok ? answerText : `failed: ${answerText}`]
  ];
}
