// ComfyUI Courier: the "Courier" sidebar tab and the workflow menu's "Publish as Telegram command".
import { api } from "../../scripts/api.js";
import { app } from "../../scripts/app.js";
import { renderPanel } from "./courier/panel.js";
import { signPrompts } from "./courier/proof.js";
import { publishFromMenu } from "./courier/publish.js";

app.registerExtension({
  name: "comfyui.courier",
  commands: [
    { id: "Courier.PublishAsCommand", label: "Publish as Telegram command", icon: "pi pi-send",
      function: publishFromMenu },
  ],
  menuCommands: [{ path: ["Workflow"], commands: ["Courier.PublishAsCommand"] }],
  async setup() {
    signPrompts(api);
    app.extensionManager?.registerSidebarTab?.({
      id: "courier",
      icon: "pi pi-send",
      title: "Courier",
      tooltip: "Courier: Telegram bot",
      type: "custom",
      render: renderPanel,
    });
  },
});
