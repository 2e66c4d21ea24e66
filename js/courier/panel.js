// The Courier sidebar tab: bot status, onion address + QR, commands and their options
// (publish/enable/delete/export), the live queue per user and the last benchmark runs.
import { adminToken, courier, courierResponse, setAdminToken } from "./api.js";
import { benchmarkChart } from "./chart.js";
import { h, section } from "./dom.js";
import { choicesFor, commandNameOf, currentGraph, publishAsking, publishedNote } from "./publish.js";
import { renderReadiness } from "./readiness.js";

const STATE_COLORS = { ok: "#3c3", starting: "#cc3", off: "#888", error: "#e44" };
const LIVE_REFRESH_MS = 3000;

const STYLE = `
.courier-panel { padding: 8px; font-size: 13px; display: flex; flex-direction: column; gap: 12px; }
.courier-panel h3 { font-size: 13px; margin: 0 0 6px; text-transform: uppercase; opacity: .7; }
.courier-panel table { width: 100%; border-collapse: collapse; }
.courier-panel td, .courier-panel th { padding: 3px 4px; border-bottom: 1px solid var(--border-color, #444);
  text-align: left; vertical-align: top; }
.courier-panel input[type=text], .courier-panel input[type=password] { width: 100%; box-sizing: border-box;
  background: var(--comfy-input-bg, #222); color: var(--input-text, inherit);
  border: 1px solid var(--border-color, #444); padding: 4px; border-radius: 4px; }
.courier-panel button { cursor: pointer; background: var(--comfy-input-bg, #333); color: inherit;
  border: 1px solid var(--border-color, #555); border-radius: 4px; padding: 3px 8px; }
.courier-panel .courier-row { display: flex; gap: 6px; align-items: center; margin: 4px 0; }
.courier-panel .courier-note { opacity: .7; font-size: 12px; }
.courier-panel .courier-error { color: #e66; }
.courier-panel .courier-ok { color: #6c6; }
.courier-panel .courier-qr { width: 160px; height: 160px; image-rendering: pixelated; background: #fff; }
.courier-panel code { word-break: break-all; }
`;

function message(target, text, kind = "note") {
  target.replaceChildren(text ? h("div", { class: `courier-${kind}` }, text) : "");
}

const AUTH_ERRORS = ["admin_token_unset", "unauthorized", "bad_token"];

/** Shows an error in `target`; a refused token is explained once, in `tokenHelp`. */
function reporter(tokenHelp) {
  return (target, error) => {
    if (AUTH_ERRORS.includes(error.code)) {
      message(tokenHelp, error.message, "error");
      message(target, "Needs the admin token (see the top of this panel).", "error");
    } else {
      message(target, error.message, "error");
    }
  };
}

function tokenSection(help, refresh) {
  const field = h("input", { type: "password", placeholder: "COURIER_ADMIN_TOKEN", value: adminToken(),
                              "data-courier": "token" });
  const save = h("button", { onclick: () => { setAdminToken(field.value.trim()); message(help, ""); refresh(); } },
                 "Save");
  return section("Admin token", h("div", { class: "courier-row" }, field, save), help,
    h("div", { class: "courier-note" },
      "Needed to publish, enable or delete commands (and to read status from another machine). "
      + "Kept in this browser only."));
}

async function renderStatus(target) {
  const health = await courier("/courier/health");
  target.replaceChildren(...Object.entries(health.components).map(([name, part]) =>
    h("div", { class: "courier-row", "data-component": name },
      h("span", { style: `color: ${STATE_COLORS[part.state] ?? "#888"}` }, "●"),
      h("span", {}, h("b", {}, name), ` ${part.state}`, h("br"), h("small", {}, part.reason ?? "")))));
}

async function renderAnyone(target) {
  const anyone = await courier("/courier/anyone");
  if (!anyone.onion_address) {
    message(target, `Not published as a hidden service (${anyone.reason ?? anyone.state}).`);
    return;
  }
  const blob = await (await courierResponse("/courier/anyone/qr.png")).blob();
  target.replaceChildren(
    h("div", {}, h("code", { "data-courier": "onion" }, anyone.url)),
    h("img", { class: "courier-qr", src: URL.createObjectURL(blob), alt: `QR code of ${anyone.url}` }));
}

function publishSection(failure, refreshCommands) {
  const name = h("input", { type: "text", placeholder: "mycmd", "data-courier": "publish-name" });
  const description = h("input", { type: "text", placeholder: "What the command does",
                                   "data-courier": "publish-description" });
  const replace = h("input", { type: "checkbox", "data-courier": "publish-replace" });
  const result = h("div", { "data-courier": "publish-result" });
  currentGraph().then((graph) => { name.value ||= commandNameOf(graph); }).catch(() => {});
  const button = h("button", { "data-courier": "publish", onclick: async () => {
    message(result, "Publishing…");
    try {
      const auto = await choicesFor(await currentGraph(), name.value.trim());
      if (!auto) {
        message(result, "Not published.");
        return;
      }
      const published = await publishAsking({ name: name.value.trim(), description: description.value.trim(),
                                              replace: replace.checked, auto });
      if (!published) {
        message(result, "Not published.");
        return;
      }
      message(result, `Published /${published.command.name}. ${publishedNote(published)}`, "ok");
      refreshCommands();
    } catch (error) {
      failure(result, error);
    }
  } }, "Publish current graph");
  return section("Publish as Telegram command",
    h("div", { class: "courier-row" }, name), h("div", { class: "courier-row" }, description),
    h("label", { class: "courier-row" }, replace, "replace a command of that name"),
    h("div", { class: "courier-row" }, button),
    h("div", { class: "courier-note" }, "A graph without Telegram nodes works too: Courier shows where the user's "
      + "words and picture go and what is sent, before it publishes."), result);
}

async function download(name) {
  const blob = await (await courierResponse(`/courier/commands/${encodeURIComponent(name)}/export`)).blob();
  const link = h("a", { href: URL.createObjectURL(blob), download: `${name}.json` });
  link.click();
  URL.revokeObjectURL(link.href);
}

/** A command's options as users type them: "--seed --ar --size 256–2048 --n 1–4" (bounds where it sets them). */
function optionsText(options) {
  return options.map((option) => (option.low === undefined ? `--${option.name}`
    : `--${option.name} ${option.low}–${option.high}`)).join(" ");
}

async function renderCommands(target, status, failure, refresh) {
  const act = (action) => async () => {
    try {
      await action();
      message(status, "");
      refresh();
    } catch (error) {
      failure(status, error);
    }
  };
  const { commands } = await courier("/courier/commands");
  target.replaceChildren(h("table", { "data-courier": "commands" },
    h("tr", {}, h("th", {}, "command"), h("th", {}, "on"), h("th", {}, "")),
    ...commands.map((command) => h("tr", { "data-command": command.name },
      h("td", {}, h("b", {}, `/${command.name}`), command.source === "seed" ? h("small", {}, " shipped") : "",
        h("br"), h("small", {}, command.description),
        command.options?.length ? h("div", { class: "courier-note", "data-courier": "options",
                                             title: "Options users can add to the command" },
                                    optionsText(command.options)) : ""),
      h("td", {}, h("input", { type: "checkbox", checked: command.enabled, title: "enabled",
        onchange: act(() => courier(`/courier/commands/${command.name}`,
                                         { method: "PATCH", body: { enabled: !command.enabled } })) })),
      h("td", {},
        h("button", { title: "Download the workflow (API format)", onclick: act(() => download(command.name)) }, "⤓"),
        command.source === "seed" ? "" : h("button", { title: "Delete", onclick: act(() =>
          courier(`/courier/commands/${command.name}`, { method: "DELETE" })) }, "✕"))))));
}

async function renderQueue(target) {
  const { jobs, users } = await courier("/courier/jobs");
  if (!jobs.length) {
    message(target, "No jobs are queued or running.");
    return;
  }
  target.replaceChildren(...users.map((user) => h("div", { "data-user": user.user_id },
    h("b", {}, `user ${user.user_id}`), ` ${user.running} running, ${user.queued} queued`,
    h("ul", {}, ...jobs.filter((job) => job.user_id === user.user_id).map((job) => h("li", {},
      `#${job.id} /${job.command} `,
      job.status === "running"
        ? `running${job.progress?.percent !== undefined ? ` ${job.progress.percent}%` : ""}`
        : `queued, position ${job.position}, ${startsIn(job.starts_in_s)}`))))));
}

/** When a queued job starts, as its chat's queue message says it. */
function startsIn(seconds) {
  return seconds === null ? "no estimate yet" : `starts in about ${Math.ceil(seconds)} s`;
}

async function renderBenchmarks(target) {
  const { runs } = await courier("/courier/benchmarks?limit=8");
  if (!runs.length) {
    message(target, "No benchmark runs stored yet (add a Benchmark node to a workflow and queue it).");
    return;
  }
  target.replaceChildren(benchmarkChart(runs));
}

/** Fill `element` (the sidebar tab's) with the panel; live parts refresh while it is shown. */
export function renderPanel(element) {
  const root = h("div", { class: "courier-panel" });
  element.replaceChildren(h("style", {}, STYLE), root);
  const parts = {
    status: h("div"), anyone: h("div"), commands: h("div"), commandStatus: h("div"), queue: h("div"),
    benchmarks: h("div"), readiness: h("div"),
  };
  const tokenHelp = h("div", { "data-courier": "token-help" });
  const failure = reporter(tokenHelp);
  const load = (target, render) => render(target).catch((error) => failure(target, error));
  const refreshCommands = () => load(parts.commands, (target) => renderCommands(target, parts.commandStatus,
                                                                               failure, refreshCommands));
  const refreshAll = () => {
    load(parts.status, renderStatus);
    load(parts.anyone, renderAnyone);
    refreshCommands();
    load(parts.readiness, renderReadiness);
    load(parts.queue, renderQueue);
    load(parts.benchmarks, renderBenchmarks);
  };
  root.append(
    tokenSection(tokenHelp, refreshAll),
    section("Bot", parts.status),
    section("Onion address", parts.anyone),
    publishSection(failure, refreshCommands),
    section("Commands", parts.commands, parts.commandStatus),
    section("Models", parts.readiness),
    section("Queue", parts.queue),
    section("Benchmarks", parts.benchmarks));
  refreshAll();
  const timer = setInterval(() => {
    if (!root.isConnected) {
      clearInterval(timer);
      return;
    }
    load(parts.queue, renderQueue);
    load(parts.status, renderStatus);
  }, LIVE_REFRESH_MS);
}
