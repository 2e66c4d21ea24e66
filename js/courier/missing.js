// Model files a published graph names that backends lack (the reply's `models`: per backend {url, ready,
// missing}): a line for the panel and the toast, and the question asked before publishing a graph that
// no backend can run (409 models_missing; publishing anyway sends confirm_missing).
import { BOX, PANEL } from "./found.js";
import { h } from "./dom.js";

/** "Missing on <url>: name (folder), …; …", or "" when every checked backend has every file. */
export function missingLine(models = []) {
  const lacking = models.filter((backend) => backend.missing.length);
  if (!lacking.length) return "";
  return "Missing on " + lacking.map((backend) => `${backend.url}: `
    + backend.missing.map((file) => `${file.name} (${file.folder})`).join(", ")).join("; ");
}

/** Asks whether to publish though no backend has every model file; resolves to true or false. */
export function askMissing(message) {
  return new Promise((resolve) => {
    const overlay = h("div", { style: BOX, "data-courier": "missing-dialog" },
      h("div", { style: PANEL }, h("b", {}, "Publish without its model files?"),
        h("div", { "data-courier": "missing-message", style: "word-break: break-word" }, message),
        h("div", { style: "display:flex;gap:8px;justify-content:flex-end" },
          h("button", { "data-courier": "missing-cancel", onclick: () => close(false) }, "Cancel"),
          h("button", { "data-courier": "missing-publish", onclick: () => close(true) }, "Publish anyway"))));
    const close = (value) => {
      overlay.remove();
      resolve(value);
    };
    document.body.append(overlay);
  });
}
