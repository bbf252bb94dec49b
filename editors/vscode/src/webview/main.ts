/**
 * Runs inside the chat webview (a browser context, no Node, no vscode
 * module). It shows what the extension renders and sends back what the user
 * does; the only logic here is the mention picker's keyboard handling.
 */

import { applyPick, triggerToken, type PickerItem } from "../chat/mentions";

declare function acquireVsCodeApi(): { postMessage(message: unknown): void };

type ToWebview =
  | { type: "reset"; html: string; busy: boolean }
  | { type: "upsert"; id: string; html: string }
  | { type: "busy"; busy: boolean }
  | { type: "completions"; requestId: number; items: PickerItem[] };

const vscode = acquireVsCodeApi();
const log = document.getElementById("log") as HTMLDivElement;
const prompt = document.getElementById("prompt") as HTMLTextAreaElement;
const send = document.getElementById("send") as HTMLButtonElement;
const cancel = document.getElementById("cancel") as HTMLButtonElement;
const picker = document.getElementById("picker") as HTMLUListElement;
const state = document.getElementById("state") as HTMLSpanElement;

let pickerItems: PickerItem[] = [];
let selected = 0;
let requestId = 0;

function fragment(html: string): DocumentFragment {
  // The extension escapes or sanitises everything it renders (render.ts).
  return document.createRange().createContextualFragment(html);
}

function scrollToEnd(): void {
  log.scrollTop = log.scrollHeight;
}

function setBusy(busy: boolean): void {
  send.disabled = busy;
  cancel.hidden = !busy;
  state.textContent = busy ? "Working…" : "";
  document.body.classList.toggle("busy", busy);
}

function upsert(id: string, html: string): void {
  const existing = log.querySelector(`[data-id="${CSS.escape(id)}"]`);
  const node = fragment(html);
  if (existing) {
    // Keep folded sections the user opened open while text streams in.
    const open = Array.from(existing.querySelectorAll("details")).map((d) => d.open);
    existing.replaceWith(node);
    const replaced = log.querySelector(`[data-id="${CSS.escape(id)}"]`);
    replaced?.querySelectorAll("details").forEach((d, i) => {
      if (open[i]) d.open = true;
    });
  } else {
    log.appendChild(node);
  }
  scrollToEnd();
}

function submit(): void {
  const text = prompt.value.trim();
  if (!text || send.disabled) return;
  vscode.postMessage({ type: "send", prompt: text });
  prompt.value = "";
  hidePicker();
}

function hidePicker(): void {
  picker.hidden = true;
  pickerItems = [];
}

function renderPicker(): void {
  picker.replaceChildren(
    ...pickerItems.map((item, index) => {
      const li = document.createElement("li");
      li.setAttribute("role", "option");
      li.className = index === selected ? "selected" : "";
      li.textContent = item.label;
      if (item.detail) {
        const detail = document.createElement("span");
        detail.className = "detail";
        detail.textContent = ` ${item.detail}`;
        li.appendChild(detail);
      }
      li.addEventListener("mousedown", (event) => {
        event.preventDefault();
        pick(index);
      });
      return li;
    }),
  );
  picker.hidden = pickerItems.length === 0;
}

function pick(index: number): void {
  const item = pickerItems[index];
  if (!item) return;
  const result = applyPick(prompt.value, prompt.selectionStart ?? prompt.value.length, item);
  prompt.value = result.text;
  prompt.setSelectionRange(result.cursor, result.cursor);
  hidePicker();
  prompt.focus();
  requestCompletions();
}

function requestCompletions(): void {
  const before = prompt.value.slice(0, prompt.selectionStart ?? prompt.value.length);
  if (!triggerToken(before)) {
    hidePicker();
    return;
  }
  vscode.postMessage({ type: "complete", requestId: ++requestId, textBeforeCursor: before });
}

prompt.addEventListener("input", requestCompletions);
prompt.addEventListener("keydown", (event) => {
  if (!picker.hidden && pickerItems.length > 0) {
    if (event.key === "ArrowDown" || event.key === "ArrowUp") {
      const step = event.key === "ArrowDown" ? 1 : -1;
      selected = (selected + step + pickerItems.length) % pickerItems.length;
      renderPicker();
      event.preventDefault();
      return;
    }
    if (event.key === "Enter" || event.key === "Tab") {
      pick(selected);
      event.preventDefault();
      return;
    }
    if (event.key === "Escape") {
      hidePicker();
      event.preventDefault();
      return;
    }
  }
  if (event.key === "Enter" && !event.shiftKey) {
    event.preventDefault();
    submit();
  }
});
prompt.addEventListener("blur", () => setTimeout(hidePicker, 150));
send.addEventListener("click", submit);
cancel.addEventListener("click", () => vscode.postMessage({ type: "cancel" }));
(document.getElementById("new") as HTMLButtonElement).addEventListener("click", () =>
  vscode.postMessage({ type: "newSession" }),
);
(document.getElementById("sessions") as HTMLButtonElement).addEventListener("click", () =>
  vscode.postMessage({ type: "showSessions" }),
);
log.addEventListener("click", (event) => {
  const button = (event.target as HTMLElement | null)?.closest<HTMLButtonElement>("button.restore");
  if (button) vscode.postMessage({ type: "restore", turn: Number(button.dataset.turn) });
});

window.addEventListener("message", (event: MessageEvent<ToWebview>) => {
  const message = event.data;
  switch (message.type) {
    case "reset":
      log.replaceChildren(fragment(message.html));
      setBusy(message.busy);
      scrollToEnd();
      break;
    case "upsert":
      upsert(message.id, message.html);
      break;
    case "busy":
      setBusy(message.busy);
      break;
    case "completions":
      if (message.requestId !== requestId) return; // a newer keystroke asked again
      pickerItems = message.items;
      selected = 0;
      renderPicker();
      break;
  }
});

vscode.postMessage({ type: "ready" });
