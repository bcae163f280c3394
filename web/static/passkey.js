// Passkeys (WebAuthn): the browser side of the two ceremonies. The server
// sends the options as JSON (binary fields in base64url); the browser's
// JSON helpers turn them into what navigator.credentials takes, and the
// credential back into JSON.
import { api } from "./common.js";

export const passkeysSupported = () =>
  typeof PublicKeyCredential === "function" && typeof PublicKeyCredential.parseCreationOptionsFromJSON === "function";

// registerPasskey adds a passkey to the signed-in account.
export async function registerPasskey() {
  const opts = await api("POST", "/api/passkeys/register/begin", {});
  const cred = await navigator.credentials.create({ publicKey: PublicKeyCredential.parseCreationOptionsFromJSON(opts.publicKey) });
  return api("POST", "/api/passkeys/register/finish", cred.toJSON());
}

// signInWithPasskey signs in with any passkey this device has for the site.
export async function signInWithPasskey() {
  const opts = await api("POST", "/api/passkeys/login/begin", {});
  const cred = await navigator.credentials.get({ publicKey: PublicKeyCredential.parseRequestOptionsFromJSON(opts.publicKey) });
  return api("POST", "/api/passkeys/login/finish", cred.toJSON());
}
