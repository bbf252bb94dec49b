import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { RestingCursor, type Timers } from "../src/restingCursor";

/** Timers on a hand-moved clock. */
function clock(): Timers & { advance(ms: number): void } {
  let now = 1000;
  let pending: { at: number; run: () => void; id: number }[] = [];
  let ids = 0;
  return {
    now: () => now,
    set(run, ms) {
      ids += 1;
      pending.push({ at: now + ms, run, id: ids });
      return ids;
    },
    clear(handle) {
      pending = pending.filter((p) => p.id !== handle);
    },
    advance(ms) {
      now += ms;
      const due = pending.filter((p) => p.at <= now);
      pending = pending.filter((p) => p.at > now);
      for (const p of due) p.run();
    },
  };
}

describe("RestingCursor", () => {
  it("tells the server once the cursor has rested, once per line", () => {
    const t = clock();
    const sent: [string, number, number][] = [];
    const cursor = new RestingCursor((uri, line, ch) => sent.push([uri, line, ch]), 300, t);
    cursor.moved("file:///a.py", 3, 0);
    t.advance(100);
    cursor.moved("file:///a.py", 4, 2); // still moving: the first is dropped
    t.advance(299);
    assert.deepEqual(sent, []);
    t.advance(1);
    assert.deepEqual(sent, [["file:///a.py", 4, 2]]);
    cursor.moved("file:///a.py", 4, 7); // the same line
    t.advance(300);
    assert.equal(sent.length, 1);
    cursor.moved("file:///b.py", 4, 7); // another document
    t.advance(300);
    assert.deepEqual(sent[1], ["file:///b.py", 4, 7]);
  });
  it("stays quiet while the user types", () => {
    const t = clock();
    const sent: number[] = [];
    const cursor = new RestingCursor((_uri, line) => sent.push(line), 300, t);
    cursor.edited();
    cursor.moved("file:///a.py", 9, 1);
    t.advance(300);
    assert.deepEqual(sent, []);
    t.advance(1000);
    cursor.moved("file:///a.py", 9, 1); // still, after typing stopped
    t.advance(300);
    assert.deepEqual(sent, [9]);
  });
});
