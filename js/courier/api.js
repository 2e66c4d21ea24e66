// Calls to Courier's /courier routes through ComfyUI's api (which adds the /api prefix),
// with the admin token kept in this browser's localStorage.
import { api } from "../../../scripts/api.js";

const TOKEN_KEY = "courier.adminToken";

export class CourierError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export function adminToken() {
  return localStorage.getItem(TOKEN_KEY) ?? "";
}

export function setAdminToken(token) {
  if (token) localStorage.setItem(TOKEN_KEY, token);
  else localStorage.removeItem(TOKEN_KEY);
}

function authHeaders() {
  const token = adminToken();
  return token ? { Authorization: `Bearer ${token}` } : {};
}

/** The raw Response of a Courier route; throws CourierError for {error: {code, message}} replies. */
export async function courierResponse(path, { method = "GET", body } = {}) {
  const headers = authHeaders();
  const options = { method, headers, cache: "no-store" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    options.body = JSON.stringify(body);
  }
  const response = await api.fetchApi(path, options);
  if (!response.ok) {
    let error = { code: `http_${response.status}`, message: response.statusText };
    try {
      error = (await response.json()).error ?? error;
    } catch {
      // not JSON: keep the status line
    }
    throw new CourierError(response.status, error.code, error.message);
  }
  return response;
}

/** A Courier route's JSON reply. */
export async function courier(path, options) {
  return (await courierResponse(path, options)).json();
}
