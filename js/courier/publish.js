// Publishing the graph open in the editor as a bot command (POST /courier/commands).
import { app } from "../../../scripts/app.js";
import { courier } from "./api.js";
import { chooseFound } from "./found.js";
import { askMissing, missingLine } from "./missing.js";

export const INPUT_NODE = "CourierTelegramInput";
const OUTPUT_NODE = "CourierTelegramOutput";

/** The open graph in API format, as ComfyUI queues it. */
export async function currentGraph() {
  return (await app.graphToPrompt()).output;
}

/** The command name set on the graph's Telegram Input, or "" when there is none. */
export function commandNameOf(graph) {
  const input = Object.values(graph).find((node) => node.class_type === INPUT_NODE);
  return typeof input?.inputs?.command === "string" ? input.inputs.command : "";
}

/** Whether the graph has none of the pack's Telegram nodes: Courier then finds where they go. */
export function isPlain(graph) {
  return !Object.values(graph).some((node) => [INPUT_NODE, OUTPUT_NODE].includes(node.class_type));
}

/** For a plain graph, the dialog's choices (null: cancelled); {} for a graph with Telegram nodes. */
export async function choicesFor(graph, name) {
  return isPlain(graph) ? chooseFound(graph, `Publish /${name.replace(/^\//, "")} as a command`) : {};
}

/** Publish the open graph (`auto`: the choices for a plain one); resolves to {command, menu_updated, models},
 * throws CourierError. */
export async function publishGraph({ name, description = "", replace = false, auto = null, confirmMissing = false }) {
  const workflow = await currentGraph();
  const found = auto && isPlain(workflow) ? { auto: true, ...auto } : {};
  return courier("/courier/commands", {
    method: "POST",
    body: { workflow, name: name.replace(/^\//, ""), description, replace, ...found,
            ...(confirmMissing ? { confirm_missing: true } : {}) },
  });
}

/** publishGraph, asking first where no backend has every model file the graph names; null when declined. */
export async function publishAsking(options) {
  try {
    return await publishGraph(options);
  } catch (error) {
    if (error.code !== "models_missing") throw error;
    if (!(await askMissing(error.message))) return null;
    return publishGraph({ ...options, confirmMissing: true });
  }
}

/** What the editor says after publishing: the bot's menu, and the model files backends lack. */
export function publishedNote(result) {
  const missing = missingLine(result.models);
  return (result.menu_updated ? "The bot's menu is updated." : "The bot is not running.") + (missing ? ` ${missing}.` : "");
}

/** The workflow menu's "Publish as Telegram command": asks name and description, confirms a replace. */
export async function publishFromMenu() {
  const dialog = app.extensionManager.dialog;
  const toast = app.extensionManager.toast;
  const suggested = commandNameOf(await currentGraph());
  const name = await dialog.prompt({ title: "Publish as Telegram command", message: "Command name (a-z, 0-9, _):",
                                     defaultValue: suggested });
  if (!name) return;
  const description = await dialog.prompt({ title: `Publish /${name}`, message: "Description shown in the bot's menu:",
                                            defaultValue: "" });
  if (description === null) return;
  try {
    const auto = await choicesFor(await currentGraph(), name);
    if (!auto) return;
    let result;
    try {
      result = await publishAsking({ name, description, auto });
    } catch (error) {
      if (error.code !== "command_exists") throw error;
      const replace = await dialog.confirm({ title: `Replace /${name}?`, message: error.message, type: "overwrite" });
      if (!replace) return;
      result = await publishAsking({ name, description, replace: true, auto });
    }
    if (!result) return;
    toast.add({ severity: missingLine(result.models) ? "warn" : "success", summary: `Published /${result.command.name}`,
                detail: publishedNote(result), life: 8000 });
  } catch (error) {
    toast.add({ severity: "error", summary: "Publishing failed", detail: error.message, life: 10000 });
  }
}
