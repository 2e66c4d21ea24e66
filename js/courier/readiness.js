// The panel's "Models" section: which commands are ready on which backend (GET /courier/readiness),
// and for one that is not, the model files it lacks, with their folder and a download link.
import { courier } from "./api.js";
import { h } from "./dom.js";

const MARKS = { true: "✓", false: "✗", null: "…" };

function cellTitle(url, state) {
  if (state.ready === null) return `${url}: not checked yet`;
  if (state.ready) return `${url}: every model file is there`;
  return `${url} lacks ${state.missing.map((file) => file.name).join(", ")}`;
}

/** The files a command lacks on some backend, each once: "name (folder) download" (the link, where known). */
function missingList(command) {
  const missing = new Map(command.backends.flatMap((state) => state.missing).map((file) => [file.name, file]));
  if (!missing.size) return "";
  return h("div", { class: "courier-note", "data-courier": "missing", style: "word-break: break-all" }, "Missing: ",
    ...[...missing.values()].flatMap((file, index) => [index ? ", " : "",
      h("span", { "data-file": file.name }, `${file.name} (${file.folder}) `,
        file.url ? h("a", { href: file.url, target: "_blank", rel: "noopener noreferrer", style: "white-space: nowrap",
                            title: `Download into models/${file.folder}/` }, "download") : "")]));
}

export async function renderReadiness(target) {
  const { backends, commands } = await courier("/courier/readiness");
  target.replaceChildren(h("table", { "data-courier": "readiness" },
    h("tr", {}, ...backends.map((url, index) => h("th", { title: url }, `#${index + 1}`)), h("th", {}, "command")),
    ...commands.map((command) => h("tr", { "data-models-of": command.name },
      ...command.backends.map((state) => h("td", {
        "data-ready": String(state.ready), title: cellTitle(state.url, state),
        class: state.ready ? "courier-ok" : state.ready === false ? "courier-error" : "" },
      MARKS[state.ready])),
      h("td", {}, h("b", {}, `/${command.name}`), command.enabled ? "" : h("small", {}, " off"),
        missingList(command))))),
  h("div", { class: "courier-note" },
    backends.map((url, index) => `#${index + 1} ${url}`).join(" · "),
    " — ✓ ready, ✗ model files missing, … not checked yet"));
}
