/**
 * Where the cursor comes to rest, told to the server (agentls/didMoveCursor,
 * docs/protocol.md): a local model then evaluates the prompt at that place
 * before the first keystroke there, so the first suggestion waits for the
 * model's own few tokens rather than the whole window. Once per line, after
 * the cursor has been still for `delayMs`; not while the user types (the
 * inline completion requests do that work). No vscode import: unit-tested.
 */

export interface Timers {
  set(run: () => void, ms: number): unknown;
  clear(handle: unknown): void;
  now(): number;
}

const realTimers: Timers = {
  set: (run, ms) => setTimeout(run, ms),
  clear: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
  now: () => Date.now(),
};

export class RestingCursor {
  private told: { uri: string; line: number } | undefined;
  private lastEdit = 0;
  private timer: unknown;

  constructor(
    private readonly send: (uri: string, line: number, character: number) => void,
    private readonly delayMs: number,
    private readonly timers: Timers = realTimers,
  ) {}

  /** The document changed (typing): the next rest is measured from here. */
  edited(): void {
    this.lastEdit = this.timers.now();
  }

  /** The cursor moved in `uri`. */
  moved(uri: string, line: number, character: number): void {
    if (this.timer !== undefined) this.timers.clear(this.timer);
    const movedAt = this.timers.now();
    this.timer = this.timers.set(() => {
      this.timer = undefined;
      if (movedAt - this.lastEdit < this.delayMs) return; // typing: its requests warm
      if (this.told && this.told.uri === uri && this.told.line === line) return;
      this.told = { uri, line };
      this.send(uri, line, character);
    }, this.delayMs);
  }

  dispose(): void {
    if (this.timer !== undefined) this.timers.clear(this.timer);
    this.timer = undefined;
  }
}
