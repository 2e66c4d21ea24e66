// Proof of the editor for Telegram Output's send_to_chat (the server's side: editor_proof.py).
// Every POST /prompt that asks a Telegram Output to send to a chat gets extra_data.courier_editor =
// {ts, nonce, mac}: HMAC-SHA256, keyed by the admin token of the Courier panel, over the chats, the
// prompt's canonical hash, the time and a nonce. Without a token (or outside a secure context, where
// browsers offer no crypto.subtle) the prompt goes unsigned and the node says why nothing was sent.
import { adminToken } from "./api.js";

const OUTPUT_NODE = "CourierTelegramOutput";
const CONTEXT = "courier-editor-v1";
export const PROOF_KEY = "courier_editor";

/** JSON.stringify with sorted keys, as editor_proof.canonical_json. */
export function canonicalJson(value) {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value !== null && typeof value === "object") {
    return `{${Object.keys(value).sort().map((k) => `${JSON.stringify(k)}:${canonicalJson(value[k])}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

function chatsOf(prompt) {
  const chats = new Set();
  for (const node of Object.values(prompt ?? {})) {
    const chat = node?.class_type === OUTPUT_NODE ? node.inputs?.send_to_chat : undefined;
    if (typeof chat === "string" && chat.trim()) chats.add(chat.trim());
  }
  return [...chats].sort();
}

const hex = (buffer) => [...new Uint8Array(buffer)].map((b) => b.toString(16).padStart(2, "0")).join("");

/** The /prompt body text with its proof, or unchanged when it asks no chat (or cannot be signed). */
export async function signedPromptBody(text, token = adminToken()) {
  if (!token || !globalThis.crypto?.subtle) return text;
  const body = JSON.parse(text);
  const chats = chatsOf(body.prompt);
  if (!chats.length) return text;
  const encoder = new TextEncoder();
  const graph = hex(await crypto.subtle.digest("SHA-256", encoder.encode(canonicalJson(body.prompt))));
  const ts = Date.now();
  const nonce = hex(crypto.getRandomValues(new Uint8Array(16)));
  const key = await crypto.subtle.importKey("raw", encoder.encode(token), { name: "HMAC", hash: "SHA-256" },
    false, ["sign"]);
  const message = [CONTEXT, chats.join(","), graph, String(ts), nonce].join("\n");
  const mac = hex(await crypto.subtle.sign("HMAC", key, encoder.encode(message)));
  body.extra_data = { ...body.extra_data, [PROOF_KEY]: { ts, nonce, mac } };
  return JSON.stringify(body);
}

/** Sign every prompt the editor queues: at api.fetchApi, where the /prompt body is final. */
export function signPrompts(api) {
  const fetchApi = api.fetchApi.bind(api);
  api.fetchApi = async (route, options = {}) => {
    if (route === "/prompt" && options.method === "POST" && typeof options.body === "string") {
      options = { ...options, body: await signedPromptBody(options.body) };
    }
    return fetchApi(route, options);
  };
}
