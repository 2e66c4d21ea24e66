// Reply keyboards and Mini Apps in the web chat: the chat's keyboard (view.keyboard) under the field;
// a text button sends its text, a web_app button opens the page in an overlay with the launch
// parameters Telegram passes in the URL's fragment (tgWebAppVersion, tgWebAppPlatform,
// tgWebAppThemeParams: light or dark as this browser prefers). The page talks back as Telegram Web
// does, by postMessage {eventType, eventData}: "web_app_data_send" arrives as a web_app_data message
// (the test API), and closes the page, as does "web_app_close".
"use strict";

const LIGHT = {bg_color: "#ffffff", text_color: "#000000", hint_color: "#707579", link_color: "#3390ec",
               button_color: "#3390ec", button_text_color: "#ffffff", secondary_bg_color: "#f4f4f5"};
const DARK = {bg_color: "#212121", text_color: "#ffffff", hint_color: "#aaaaaa", link_color: "#8774e1",
              button_color: "#8774e1", button_text_color: "#ffffff", secondary_bg_color: "#181818"};
const miniApp = {frame: null, button: null, shown: ""};

function showKeyboard(keyboard) {
  const signature = JSON.stringify(keyboard || null);
  if (signature === miniApp.shown) return;
  miniApp.shown = signature;
  const box = $("reply-keyboard");
  box.replaceChildren(...(keyboard ? keyboard.keyboard : []).map((row) => {
    const line = document.createElement("div");
    line.append(...row.map((button) => {
      const element = document.createElement("button");
      element.type = "button";
      element.textContent = typeof button === "string" ? button : button.text;
      element.onclick = () => (button.web_app ? openMiniApp(button) : sendText(element.textContent));
      return element;
    }));
    return line;
  }));
  box.hidden = !keyboard;
}

function sendText(text) {
  postJson(botPath("/messages"), {user_id: state.user.id, text}).catch((error) => toast(error.message));
}

function launchUrl(url) {
  const theme = matchMedia("(prefers-color-scheme: dark)").matches ? DARK : LIGHT;
  const launch = new URLSearchParams({tgWebAppVersion: "8.0", tgWebAppPlatform: "weba",
                                      tgWebAppThemeParams: JSON.stringify(theme)});
  return url + (url.includes("#") ? "&" : "#") + launch.toString();
}

function openMiniApp(button) {
  closeMiniApp();
  const overlay = $("miniapp");
  miniApp.button = button.text;
  miniApp.frame = document.createElement("iframe");
  miniApp.frame.src = launchUrl(button.web_app.url);
  overlay.querySelector(".frame").replaceChildren(miniApp.frame);
  overlay.hidden = false;
}

function closeMiniApp() {
  $("miniapp").hidden = true;
  $("miniapp").querySelector(".frame").replaceChildren();
  miniApp.frame = null;
}

window.addEventListener("message", async (event) => {
  if (!miniApp.frame || event.source !== miniApp.frame.contentWindow) return;
  let message;
  try { message = JSON.parse(event.data); } catch { return; }
  if (message.eventType === "web_app_close") closeMiniApp();
  if (message.eventType !== "web_app_data_send") return;
  const buttonText = miniApp.button;
  closeMiniApp();
  try {
    await postJson(botPath("/web_app_data"), {user: state.user.id, data: String(message.eventData?.data ?? ""),
                                              button_text: buttonText});
  } catch (error) { toast(error.message); }
});
