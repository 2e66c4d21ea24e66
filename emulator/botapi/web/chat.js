// The web chat: plays one user of the emulator's test API and shows the chat as Telegram would.
"use strict";

const API = "/_emulator";
const DEFAULT_USERS = [
  {id: 1001, first_name: "Ada", language_code: "en"},
  {id: 1002, first_name: "Greta", language_code: "de"},
  {id: 1003, first_name: "Ivan", language_code: "ru"},
];
const $ = (id) => document.getElementById(id);
const state = {bot: null, users: [], user: null, view: {messages: [], menu: [], answers: []},
               replyTo: null, attachment: null, events: null, rendered: new Map(), shownAnswers: new Set(),
               pendingQueries: new Set(), atBottom: true, wholeMenu: false};

async function call(path, options = {}) {
  const reply = await fetch(API + path, options);
  const body = await reply.json().catch(() => ({error: reply.statusText}));
  if (!reply.ok) throw new Error(body.error || reply.statusText);
  return body;
}

const postJson = (path, body) => call(path, {method: "POST", headers: {"Content-Type": "application/json"},
                                             body: JSON.stringify(body)});
const botPath = (path) => `/bots/${encodeURIComponent(state.bot.token)}${path}`;
const fileUrl = (fileId, download) => API + botPath(`/files/${encodeURIComponent(fileId)}`) + (download ? "?download=1" : "");

function toast(text) {
  const box = $("toast");
  box.textContent = text;
  box.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { box.hidden = true; }, 4000);
}

// --- users and bot ---------------------------------------------------------

async function loadUsers() {
  state.users = await call("/users");
  if (!state.users.length) {
    for (const user of DEFAULT_USERS) await postJson("/users", user);
    state.users = await call("/users");
  }
  const select = $("user");
  select.replaceChildren(...state.users.map((user) => {
    const option = document.createElement("option");
    option.value = user.id;
    option.textContent = `${user.first_name} (${user.language_code || "no language"})`;
    return option;
  }));
}

function chooseUser(id) {
  state.user = state.users.find((user) => user.id === Number(id)) || state.users[0];
  $("user").value = state.user.id;
  localStorage.setItem("courier-chat-user", state.user.id);
  state.rendered.clear();
  state.view = {messages: [], menu: [], answers: []};
  $("messages").replaceChildren();
  setReply(null);
  follow();
}

async function addUser() {
  const name = prompt("Name of the new user");
  if (!name) return;
  const language = prompt("Telegram language code (en, de, ru, …)", "en") || "";
  const id = Math.max(1000, ...state.users.map((user) => user.id)) + 1;
  await postJson("/users", {id, first_name: name, language_code: language});
  await loadUsers();
  chooseUser(id);
}

// --- the chat's events -----------------------------------------------------

function follow() {
  if (state.events) state.events.close();
  state.events = new EventSource(API + botPath(`/chats/${state.user.id}/events`));
  state.events.onmessage = (event) => show(JSON.parse(event.data));
}

function show(view) {
  state.view = view;
  const list = $("messages");
  const ids = new Set(view.messages.map((message) => message.message_id));
  for (const [id, entry] of state.rendered) {
    if (!ids.has(id)) { entry.element.remove(); state.rendered.delete(id); }
  }
  let previous = null, previousMessage = null;
  for (const message of view.messages) {
    const signature = JSON.stringify(message);
    let entry = state.rendered.get(message.message_id);
    if (!entry || entry.signature !== signature) {
      const element = renderMessage(message);
      if (entry) entry.element.replaceWith(element);
      entry = {signature, element};
      state.rendered.set(message.message_id, entry);
    }
    if (entry.element.previousElementSibling !== previous || !entry.element.parentNode) {
      if (previous) previous.after(entry.element); else list.prepend(entry.element);
    }
    // an album's messages stack as one bubble, as Telegram groups them
    entry.element.classList.toggle("album-next", Boolean(message.media_group_id)
      && previousMessage?.media_group_id === message.media_group_id);
    previous = entry.element;
    previousMessage = message;
  }
  keepAtBottom();
  showAnswers();
  showKeyboard(view.keyboard); // miniapp.js
  if (document.activeElement === $("text")) suggest(); // the menu may have come (or changed) since the last key
}

function keepAtBottom() {
  // As a chat app does: new messages (and pictures as they load) stay in view unless the user scrolled up.
  const list = $("messages");
  if (!state.atBottom) return;
  list.scrollTop = list.scrollHeight;
  state.scrolledTo = list.scrollTop;
}

function showAnswers() {
  // A press's answer may arrive before the press's own reply names its query: both call this.
  for (const answer of state.view.answers) {
    const id = String(answer.callback_query_id);
    if (state.pendingQueries.has(id) && !state.shownAnswers.has(id)) {
      state.shownAnswers.add(id);
      if (answer.text) (answer.show_alert ? alert : toast)(answer.text);
    }
  }
}

// --- one message -----------------------------------------------------------

const ENTITY_TAGS = {bold: "b", italic: "i", underline: "u", strikethrough: "s", code: "code", pre: "pre",
                     spoiler: "span", blockquote: "blockquote", expandable_blockquote: "blockquote"};

function renderText(text, entities = [], start = 0, end = text.length) {
  // Telegram's offsets count UTF-16 code units, as JavaScript strings do.
  const fragment = document.createDocumentFragment();
  let at = start;
  const inside = entities.filter((e) => e.offset >= start && e.offset + e.length <= end)
    .sort((a, b) => a.offset - b.offset || b.length - a.length);
  for (const entity of inside) {
    if (entity.offset < at) continue; // nested: rendered by its parent
    fragment.append(text.slice(at, entity.offset));
    const children = entities.filter((e) => e !== entity && e.offset >= entity.offset
                                            && e.offset + e.length <= entity.offset + entity.length);
    const content = renderText(text, children, entity.offset, entity.offset + entity.length);
    let node;
    if (entity.type === "text_link" || entity.type === "url") {
      node = document.createElement("a");
      node.href = entity.url || text.slice(entity.offset, entity.offset + entity.length);
      node.target = "_blank";
      node.rel = "noreferrer";
    } else if (entity.type === "bot_command") {
      node = document.createElement("a");
      node.href = "#";
      node.dataset.command = text.slice(entity.offset, entity.offset + entity.length);
    } else {
      node = document.createElement(ENTITY_TAGS[entity.type] || "span");
      if (entity.type === "spoiler") node.className = "spoiler";
    }
    node.append(content);
    fragment.append(node);
    at = entity.offset + entity.length;
  }
  fragment.append(text.slice(at, end));
  return fragment;
}

function summary(message) {
  if (message.text) return message.text;
  const kind = ["photo", "video", "animation", "document", "sticker"].find((key) => message[key]);
  return `[${kind || "message"}] ${message.caption || message.document?.file_name || ""}`.trim();
}

function renderMedia(message) {
  const box = document.createDocumentFragment();
  const link = (fileId, child, download) => {
    const anchor = document.createElement("a");
    anchor.href = fileUrl(fileId, download);
    anchor.target = "_blank";
    anchor.append(child);
    anchor.addEventListener("click", (event) => event.stopPropagation());
    return anchor;
  };
  const image = (fileId, title) => {
    const img = document.createElement("img");
    img.className = "media";
    img.src = fileUrl(fileId);
    img.alt = img.title = title;
    img.addEventListener("load", keepAtBottom);
    return img;
  };
  if (message.photo) {
    const largest = message.photo[message.photo.length - 1];
    box.append(link(largest.file_id, image(largest.file_id, `photo ${largest.width}×${largest.height}`)));
  } else if (message.video || message.animation) {
    const media = message.video || message.animation;
    const video = document.createElement("video");
    video.className = "media";
    video.src = fileUrl(media.file_id);
    video.addEventListener("loadedmetadata", keepAtBottom);
    Object.assign(video, {controls: true, muted: true, loop: true, autoplay: true, playsInline: true});
    box.append(video, link(media.file_id, `Download ${media.file_name || "video"}`, true));
  } else if (message.document) {
    const doc = message.document;
    if ((doc.mime_type || "").startsWith("image/")) {
      box.append(link(doc.file_id, image(doc.file_id, `${doc.file_name} (lossless file)`)));
    }
    const name = link(doc.file_id, `${doc.file_name || "file"} (${Math.ceil((doc.file_size || 0) / 1024)} KB)`, true);
    name.className = "file";
    box.append(name);
  } else if (message.sticker) {
    box.append(image(message.sticker.file_id, message.sticker.emoji || "sticker"));
  }
  return box;
}

function renderKeyboard(message) {
  const rows = message.reply_markup?.inline_keyboard;
  if (!rows) return null;
  const keyboard = document.createElement("div");
  keyboard.className = "keyboard";
  for (const buttons of rows) {
    const row = document.createElement("div");
    row.className = "row";
    for (const button of buttons) {
      const element = document.createElement("button");
      element.type = "button";
      element.textContent = button.text;
      if (button.callback_data !== undefined) element.dataset.button = button.callback_data;
      element.addEventListener("click", (event) => { event.stopPropagation(); press(message, button); });
      row.append(element);
    }
    keyboard.append(row);
  }
  return keyboard;
}

function renderMessage(message) {
  const element = document.createElement("div");
  const fromBot = message.from?.is_bot;
  element.className = `message ${fromBot ? "from-bot" : "from-user"}`;
  element.dataset.messageId = message.message_id;
  if (message.reply_to_message) {
    const quote = document.createElement("div");
    quote.className = "quote";
    quote.textContent = summary(message.reply_to_message);
    element.append(quote);
  }
  if (message.via_bot) {
    const via = document.createElement("div");
    via.className = "via";
    via.textContent = `via @${message.via_bot.username}`;
    element.append(via);
  }
  element.append(renderMedia(message));
  const body = document.createElement("div");
  body.className = "text";
  if (message.text) body.append(renderText(message.text, message.entities));
  else if (message.caption) body.append(renderText(message.caption, message.caption_entities));
  element.append(body);
  const keyboard = renderKeyboard(message);
  if (keyboard) element.append(keyboard);
  const meta = document.createElement("div");
  meta.className = "meta";
  if (message.media_group_id) element.classList.add("in-album");
  meta.textContent = (message.media_group_id ? "album · " : "") + (message.edit_date ? "edited " : "")
    + new Date(1000 * (message.edit_date || message.date)).toLocaleTimeString();
  element.append(meta);
  element.addEventListener("click", (event) => {
    if (event.target.dataset.command) { event.preventDefault(); return send(event.target.dataset.command); }
    setReply(state.replyTo === message.message_id ? null : message);
  });
  if (state.replyTo === message.message_id) element.classList.add("replying");
  return element;
}

// --- acting as the user ----------------------------------------------------

async function press(message, button) {
  if (button.url) return window.open(button.url, "_blank", "noreferrer");
  if (switchInline(button)) return; // inline.js
  if (button.callback_data === undefined) return toast(`Not emulated: ${Object.keys(button).join(", ")}`);
  try {
    const query = await postJson(botPath("/callback_queries"),
                                 {user_id: state.user.id, message_id: message.message_id, data: button.callback_data});
    state.pendingQueries.add(String(query.id));
    showAnswers();
  } catch (error) { toast(error.message); }
}

function setReply(message) {
  state.replyTo = message ? message.message_id : null;
  for (const element of document.querySelectorAll(".message.replying")) element.classList.remove("replying");
  if (message) document.querySelector(`.message[data-message-id="${message.message_id}"]`)?.classList.add("replying");
  $("reply-bar").hidden = !message;
  $("reply-text").textContent = message ? `Reply to: ${summary(message)}` : "";
}

function setAttachment(file) {
  state.attachment = file;
  $("attachment-bar").hidden = !file;
  $("attachment-name").textContent = file ? `${file.name} (${Math.ceil(file.size / 1024)} KB)` : "";
  $("attachment-preview").src = file && file.type.startsWith("image/") ? URL.createObjectURL(file) : "";
  if (!file) { $("file").value = ""; $("as-file").checked = false; }
}

async function send(textOverride) {
  const text = textOverride ?? $("text").value;
  if (!text.trim() && !state.attachment) return;
  try {
    if (state.attachment) {
      const form = new FormData();
      form.append("user_id", state.user.id);
      form.append($("as-file").checked ? "document" : "photo", state.attachment, state.attachment.name);
      if (text) form.append("caption", text);
      if (state.replyTo) form.append("reply_to_message_id", state.replyTo);
      await call(botPath("/messages"), {method: "POST", body: form});
    } else {
      await postJson(botPath("/messages"), {user_id: state.user.id, text, reply_to_message_id: state.replyTo});
    }
  } catch (error) { return toast(error.message); }
  if (textOverride === undefined) $("text").value = "";
  setAttachment(null);
  setReply(null);
  suggest(false);
}

// --- command menu ------------------------------------------------------------

function suggest(all = state.wholeMenu) {
  // The commands that start with what is typed after "/"; the menu button lists them all.
  state.wholeMenu = all;
  const list = $("suggestions");
  const value = $("text").value;
  const word = value.startsWith("/") && !value.includes(" ") ? value.slice(1).toLowerCase() : null;
  const matches = state.view.menu.filter((command) => all || (word !== null && command.command.startsWith(word)));
  list.replaceChildren(...matches.map((command, index) => {
    const item = document.createElement("li");
    item.dataset.command = command.command;
    if (index === 0) item.className = "active";
    const name = document.createElement("b");
    name.textContent = `/${command.command}`;
    item.append(name, command.description);
    item.addEventListener("mousedown", (event) => { event.preventDefault(); complete(command.command); });
    return item;
  }));
  list.hidden = !matches.length || (!all && word === null);
}

function complete(command) {
  $("text").value = `/${command} `;
  $("text").focus();
  suggest(false);
}

// --- wiring ------------------------------------------------------------------

function wire() {
  $("send-form").addEventListener("submit", (event) => { event.preventDefault(); send(); });
  $("text").addEventListener("input", () => suggest(false));
  $("text").addEventListener("blur", () => { $("suggestions").hidden = true; state.wholeMenu = false; });
  $("text").addEventListener("keydown", (event) => {
    const active = document.querySelector("#suggestions:not([hidden]) li.active");
    if (event.key === "Tab" && active) { event.preventDefault(); complete(active.dataset.command); }
    if (event.key === "Escape") { $("suggestions").hidden = true; setReply(null); }
  });
  $("menu-button").addEventListener("mousedown", (event) => { event.preventDefault(); $("text").focus(); suggest(true); });
  $("file").addEventListener("change", () => setAttachment($("file").files[0] || null));
  $("attachment-cancel").addEventListener("click", () => setAttachment(null));
  $("reply-cancel").addEventListener("click", () => setReply(null));
  $("user").addEventListener("change", () => chooseUser($("user").value));
  $("add-user").addEventListener("click", (event) => { event.preventDefault(); addUser(); });
  const list = $("messages");
  list.addEventListener("scroll", () => {
    // Our own scroll's event can come after a picture grew the list again: only the user's scrolls decide.
    if (list.scrollTop === state.scrolledTo) return;
    state.atBottom = list.scrollHeight - list.scrollTop - list.clientHeight < 40;
  });
  list.addEventListener("dragover", (event) => { event.preventDefault(); list.classList.add("dropping"); });
  list.addEventListener("dragleave", () => list.classList.remove("dropping"));
  list.addEventListener("drop", (event) => {
    event.preventDefault();
    list.classList.remove("dropping");
    if (event.dataTransfer.files.length) setAttachment(event.dataTransfer.files[0]);
  });
}

async function start() {
  wire();
  const params = new URLSearchParams(location.search);
  const bots = await call("/bots");
  state.bot = bots.find((bot) => bot.token === params.get("bot")) || bots[0];
  if (!state.bot) { $("bot-name").textContent = "No bot on this emulator (POST /_emulator/bots)"; return; }
  $("bot-name").textContent = `${state.bot.user.first_name} @${state.bot.user.username}`;
  await loadUsers();
  chooseUser(params.get("user") || localStorage.getItem("courier-chat-user"));
}

start().catch((error) => toast(error.message));
