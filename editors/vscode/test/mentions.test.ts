import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { applyPick, completionItems, offsetAt, toPickerItems, triggerToken } from "../src/chat/mentions";

describe("triggerToken", () => {
  it("finds an @ mention being typed anywhere", () => {
    assert.deepEqual(triggerToken("look at @file:src/a"), { start: 8, token: "@file:src/a" });
    assert.deepEqual(triggerToken("@"), { start: 0, token: "@" });
    assert.equal(triggerToken("mail me at a@b"), undefined);
    assert.equal(triggerToken("done @file:a.py "), undefined);
  });
  it("finds a /template only at the start", () => {
    assert.deepEqual(triggerToken("/exp"), { start: 0, token: "/exp" });
    assert.equal(triggerToken("see src/exp"), undefined);
  });
});

describe("picker items", () => {
  it("accepts lists, CompletionLists and null", () => {
    assert.equal(completionItems(null).length, 0);
    assert.equal(completionItems([{ label: "a" }]).length, 1);
    assert.equal(completionItems({ isIncomplete: false, items: [{ label: "a" }, { label: "b" }] }).length, 2);
  });

  it("replaces the typed token with insertText or the label", () => {
    const text = "explain @file:sr";
    const [item] = toPickerItems(text, [{ label: "@file:src/a.py", insertText: "@file:src/a.py" }]);
    assert.deepEqual({ start: item.start, end: item.end }, { start: 8, end: 16 });
    assert.deepEqual(applyPick(text, text.length, item), { text: "explain @file:src/a.py ", cursor: 23 });
  });

  it("applies a textEdit range given in line/character", () => {
    const text = "line one\nsee @fi";
    const [item] = toPickerItems(text, [
      { label: "@file:b.py", textEdit: { newText: "@file:b.py", range: { start: { line: 1, character: 4 }, end: { line: 1, character: 7 } } } },
    ]);
    assert.equal(item.start, 13);
    assert.equal(applyPick(text + " rest", text.length, item).text, "line one\nsee @file:b.py rest");
  });

  it("reads agentls/complete feature entries (replacement, start, display, applied)", () => {
    const text = "fix @file:ma";
    const items = toPickerItems(text, completionItems({ items: [
      { replacement: "@file:src/main.py", start: 4, display: "src/main.py", display_meta: "file", plugin: "mentions" },
      { replacement: "/explain", start: 0, display: "/explain", applied: "Explain this code", plugin: "templates" },
    ] }));
    assert.deepEqual(items[0], { label: "src/main.py", detail: "file", newText: "@file:src/main.py", start: 4, end: 12 });
    assert.equal(applyPick(text, 12, items[0]).text, "fix @file:src/main.py ");
    assert.equal(items[1].newText, "Explain this code");
    const [prefix] = toPickerItems("@fi", [{ replacement: "@file:", start: 0, display: "@file:" }]);
    assert.equal(applyPick("@fi", 3, prefix).text, "@file:", "no space after the bare prefix");
  });

  it("does not add a space after a directory", () => {
    const [item] = toPickerItems("@file:s", [{ label: "@file:src/" }]);
    assert.equal(applyPick("@file:s", 7, item).text, "@file:src/");
  });

  it("offsetAt clamps to the text", () => {
    assert.equal(offsetAt("ab\ncd", { line: 1, character: 1 }), 4);
    assert.equal(offsetAt("ab", { line: 5, character: 9 }), 2);
  });
});
