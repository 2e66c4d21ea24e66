// Inline mode in the web chat: "@bot words" asks the bot (an inline_query through the test API) and
// lists its answer above the field; picking a result posts it in this chat "via @bot", as Telegram
// does. The answer's button (strangers get one) opens the bot's chat with /start <start_parameter>;
// a result's 📤 Share button (switch_inline_query_chosen_chat) types "@bot <its query>".
"use strict";

const INLINE_DELAY_MS = 300;
const inlineMode = {timer: null, asked: 0, results: [], query: null, next: ""};

function inlineQuery() {
  // What follows "@<this bot's username>" in the field; null when the field does not start with it.
  const match = /^@(\w+)(?:\s+([\s\S]*))?$/.exec($("text").value);
  return match && match[1].toLowerCase() === state.bot.user.username.toLowerCase() ? (match[2] || "") : null;
}

function inlineInput() {
  clearTimeout(inlineMode.timer);
  const query = inlineQuery();
  if (query === null) return showInline([], null);
  inlineMode.timer = setTimeout(() => askInline(query, ""), INLINE_DELAY_MS);
}

async function askInline(query, offset) {
  const asked = ++inlineMode.asked;
  let answer;
  try {
    answer = await postJson(botPath("/inline_queries"), {user: state.user.id, query, offset});
  } catch (error) { return toast(error.message); }
  if (asked !== inlineMode.asked) return; // a newer query is on its way
  if (!answer.ok) return toast(answer.error);
  const page = answer.results.map((result) => ({result, queryId: answer.inline_query_id}));
  inlineMode.next = answer.next_offset;
  showInline(offset ? [...inlineMode.results, ...page] : page, query, answer.button);
}

function inlineItem(title, detail, onPick) {
  const item = document.createElement("li");
  const name = document.createElement("b");
  name.textContent = title;
  item.append(name, detail || "");
  item.addEventListener("mousedown", (event) => { event.preventDefault(); onPick(); });
  return item;
}

function showInline(results, query, button) {
  inlineMode.results = results;
  inlineMode.query = query;
  const list = $("inline-results");
  const items = results.map(({result, queryId}) => {
    const fileId = result.document_file_id || result.photo_file_id;
    const item = inlineItem(result.title || result.id, result.description, () => chooseInline(queryId, result));
    item.dataset.resultId = result.id;
    if (fileId) {
      const img = document.createElement("img");
      img.src = fileUrl(fileId);
      img.alt = "";
      item.prepend(img);
    }
    return item;
  });
  if (button) {
    items.unshift(inlineItem(button.text, "", () => { showInline([], null); send(`/start ${button.start_parameter}`); }));
    items[0].className = "inline-button";
  }
  if (inlineMode.next) items.push(inlineItem("More…", "", () => askInline(query, inlineMode.next)));
  list.replaceChildren(...items);
  list.hidden = query === null;
  if (query !== null && !items.length) list.replaceChildren(inlineItem("No results", ""));
}

async function chooseInline(queryId, result) {
  try {
    await postJson(botPath("/inline_results"), {user: state.user.id, inline_query_id: queryId, result_id: result.id,
                                                chat_id: state.user.id});
  } catch (error) { return toast(error.message); }
  $("text").value = "";
  showInline([], null);
}

function switchInline(button) {
  // A switch_inline_query* button (📤 Share): Telegram opens its chat picker, then "@bot query" in the
  // chat picked; here, the one chat there is. False when the button is of another kind.
  const chosen = button.switch_inline_query_chosen_chat;
  const query = chosen ? chosen.query || "" : button.switch_inline_query ?? button.switch_inline_query_current_chat;
  if (query === undefined) return false;
  $("text").value = `@${state.bot.user.username} ${query}`;
  $("text").focus();
  inlineInput();
  return true;
}

$("text").addEventListener("input", inlineInput);
$("text").addEventListener("blur", () => { $("inline-results").hidden = true; });
