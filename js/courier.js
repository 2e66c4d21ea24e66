// ComfyUI Courier: a sidebar tab with the bot's service status.
import { app } from "../../scripts/app.js";
import { api } from "../../scripts/api.js";

const STATE_COLORS = { ok: "#3c3", starting: "#cc3", off: "#888", error: "#e44" };

async function renderStatus(root) {
  root.textContent = "Loading…";
  try {
    const response = await api.fetchApi("/courier/health");
    const health = await response.json();
    root.replaceChildren(...Object.entries(health.components).map(([name, part]) => {
      const row = document.createElement("div");
      row.style.margin = "4px 0";
      const dot = document.createElement("span");
      dot.textContent = "● ";
      dot.style.color = STATE_COLORS[part.state] ?? "#888";
      row.append(dot, `${name}: ${part.state}`, document.createElement("br"));
      const reason = document.createElement("small");
      reason.textContent = part.reason;
      row.append(reason);
      return row;
    }));
  } catch (error) {
    root.textContent = `Courier is not reachable: ${error}`;
  }
}

app.registerExtension({
  name: "comfyui.courier",
  async setup() {
    app.extensionManager?.registerSidebarTab?.({
      id: "courier",
      icon: "pi pi-send",
      title: "Courier",
      tooltip: "ComfyUI Courier: Telegram bot status",
      type: "custom",
      render: (element) => {
        const root = document.createElement("div");
        root.style.padding = "8px";
        element.replaceChildren(root);
        renderStatus(root);
      },
    });
  },
});
