// Publishing the graph open in the editor as a bot command (POST /courier/commands).
import { app } from "../../../scripts/app.js";
import { courier } from "./api.js";

export const INPUT_NODE = "CourierTelegramInput";

/** The open graph in API format, as ComfyUI queues it. */
export async function currentGraph() {
  return (await app.graphToPrompt()).output;
}

/** The command name set on the graph's Telegram Input, or "" when there is none. */
export function commandNameOf(graph) {
  const input = Object.values(graph).find((node) => node.class_type === INPUT_NODE);
  return typeof input?.inputs?.command === "string" ? input.inputs.command : "";
}

/** Publish the open graph; resolves to {command, menu_updated}, throws CourierError. */
export async function publishGraph({ name, description = "", replace = false }) {
  const workflow = await currentGraph();
  return courier("/courier/commands", {
    method: "POST",
    body: { workflow, name: name.replace(/^\//, ""), description, replace },
  });
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
    let result;
    try {
      result = await publishGraph({ name, description });
    } catch (error) {
      if (error.code !== "command_exists") throw error;
      const replace = await dialog.confirm({ title: `Replace /${name}?`, message: error.message, type: "overwrite" });
      if (!replace) return;
      result = await publishGraph({ name, description, replace: true });
    }
    toast.add({ severity: "success", summary: `Published /${result.command.name}`,
                detail: result.menu_updated ? "The bot's menu is updated." : "The bot is not running.", life: 5000 });
  } catch (error) {
    toast.add({ severity: "error", summary: "Publishing failed", detail: error.message, life: 10000 });
  }
}
