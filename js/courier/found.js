// Publishing a graph without Telegram nodes: a dialog shows what Courier found in it (POST
// /courier/commands with auto and dry_run: prompt, picture, outputs) and lets the user pick another
// prompt node or picture. Resolves to the choices to publish with, or null when cancelled.
import { courier } from "./api.js";
import { h } from "./dom.js";

export const BOX = "position:fixed;inset:0;z-index:10000;display:flex;align-items:center;justify-content:center;"
  + "background:rgba(0,0,0,.5)";
export const PANEL = "background:var(--comfy-menu-bg,#222);color:var(--fg-color,#ddd);padding:16px;border-radius:8px;"
  + "max-width:520px;display:flex;flex-direction:column;gap:8px;font-size:13px;"
  + "border:1px solid var(--border-color,#555)";

function found(workflow, choices) {
  return courier("/courier/commands", { method: "POST", body: { workflow, auto: true, dry_run: true, ...choices } })
    .then((reply) => reply.found);
}

function label(node) {
  const name = node.title && node.title !== node.class_type ? `${node.title} (${node.class_type})` : node.class_type;
  return `#${node.node} ${name}${node.text !== undefined ? `: “${node.text}”` : ""}`;
}

function picker(key, nodes, chosen, none, onchange) {
  const options = nodes.map((node) => h("option", { value: node.node, selected: node.node === chosen?.node },
                                        label(node)));
  const first = h("option", { value: "", selected: !chosen, disabled: key === "prompt" }, none);
  return h("select", { "data-courier": `auto-${key}`, onchange: (event) => onchange(event.target.value) },
           first, ...options);
}

function settable(shown) {
  return [["seed", shown.seeds], ["size", shown.size], ["steps", shown.steps],
          ["neg", shown.negative ? [shown.negative.node] : []]]
    .filter(([, nodes]) => nodes.length).map(([name, nodes]) => `--${name} (#${nodes.join(", #")})`).join(", ");
}

/** What `workflow` (API format, no Telegram nodes) becomes; resolves to {prompt?, image?} or null. */
export async function chooseFound(workflow, title) {
  let choices = {};
  let shown = await found(workflow, choices);
  return new Promise((resolve) => {
    const body = h("div", { style: "display:flex;flex-direction:column;gap:6px" });
    const publish = h("button", { "data-courier": "auto-publish", onclick: () => close(choices) }, "Publish");
    const overlay = h("div", { style: BOX, "data-courier": "auto-dialog" },
      h("div", { style: PANEL }, h("b", {}, title), body,
        h("div", { style: "display:flex;gap:8px;justify-content:flex-end" },
          h("button", { onclick: () => close(null) }, "Cancel"), publish)));
    const close = (value) => {
      overlay.remove();
      resolve(value);
    };
    const choose = async (key, value) => {
      choices = { ...choices, [key]: value };
      try {
        shown = await found(workflow, choices);
      } catch (error) {
        shown = { ...shown, problem: { code: error.code, message: error.message } };
      }
      render();
    };
    const render = () => {
      publish.disabled = Boolean(shown.problem);
      const row = (name, ...content) => h("label", { style: "display:flex;flex-direction:column;gap:2px" },
                                          h("small", { style: "opacity:.7" }, name), ...content);
      body.replaceChildren(
        row("The user's words go to", picker("prompt", shown.texts, shown.prompt, "— choose the prompt —",
                                             (value) => choose("prompt", value))),
        row("The user's picture goes to", picker("image", shown.images, shown.image, "no picture",
                                                 (value) => choose("image", value || null))),
        row("Sent to the chat", h("span", { "data-courier": "auto-outputs" },
                                  shown.outputs.map(label).join(", ") || "nothing")),
        shown.left_out.length ? row("Left out", h("span", {}, shown.left_out.map(label).join(", "))) : "",
        settable(shown) ? h("small", { style: "opacity:.7" },
                            `Users may set ${settable(shown)}; the graph's values are the defaults.`) : "",
        shown.problem ? h("div", { style: "color:#e66", "data-courier": "auto-problem" }, shown.problem.message) : "");
    };
    render();
    document.body.append(overlay);
  });
}
