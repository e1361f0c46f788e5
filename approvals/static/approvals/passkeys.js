// Passkeys (WebAuthn): adding one on "Your passkeys", and signing a decision on a question
// that needs a signature. The server makes every challenge; this only carries the bytes
// between it and navigator.credentials, base64url-encoded (WebAuthn's JSON form).
"use strict";
(function () {
  function toBytes(text) {
    const base64 = text.replace(/-/g, "+").replace(/_/g, "/");
    const padded = base64 + "===".slice((base64.length + 3) % 4);
    return Uint8Array.from(atob(padded), (c) => c.charCodeAt(0));
  }

  function toText(buffer) {
    let binary = "";
    new Uint8Array(buffer).forEach((byte) => { binary += String.fromCharCode(byte); });
    return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }

  function descriptors(list) {
    return (list || []).map((credential) => ({ ...credential, id: toBytes(credential.id) }));
  }

  function creationOptions(options) {
    return {
      ...options,
      challenge: toBytes(options.challenge),
      user: { ...options.user, id: toBytes(options.user.id) },
      excludeCredentials: descriptors(options.excludeCredentials),
    };
  }

  function requestOptions(options) {
    return {
      ...options,
      challenge: toBytes(options.challenge),
      allowCredentials: descriptors(options.allowCredentials),
    };
  }

  // What the server reads: a registration's attestation, or an assertion.
  function credentialJSON(credential) {
    const answer = credential.response;
    const response = { clientDataJSON: toText(answer.clientDataJSON) };
    if (answer.attestationObject) {
      response.attestationObject = toText(answer.attestationObject);
      response.transports = answer.getTransports ? answer.getTransports() : [];
    } else {
      response.authenticatorData = toText(answer.authenticatorData);
      response.signature = toText(answer.signature);
      response.userHandle = answer.userHandle ? toText(answer.userHandle) : null;
    }
    return {
      id: credential.id,
      rawId: toText(credential.rawId),
      type: credential.type,
      response: response,
      authenticatorAttachment: credential.authenticatorAttachment || null,
      clientExtensionResults: credential.getClientExtensionResults(),
    };
  }

  function say(element, text, failed) {
    element.textContent = text;
    element.classList.toggle("failed", Boolean(failed));
  }

  function why(error) {
    return error.name === "NotAllowedError" ? "cancelled, or no passkey answered in time" : error.message;
  }

  // The server's JSON answer, or one saying it gave none (a lost connection, a log-in page).
  async function post(url, body, headers) {
    try {
      const reply = await fetch(url, { method: "POST", credentials: "same-origin", body, headers });
      return { ok: reply.ok, status: reply.status, body: await reply.json() };
    } catch (error) {
      return { ok: false, status: 0, body: { detail: "The server did not answer; reload the page." } };
    }
  }

  // Whether the server refused (then the page says why).
  function refused(status, reply) {
    if (!reply.ok) say(status, reply.body.detail, true);
    return !reply.ok;
  }

  // The browser's passkey step: its credential, or null (the page says why not).
  async function withPasskey(status, failure, step) {
    try {
      return await step();
    } catch (error) {
      say(status, failure + ": " + why(error) + ".", true);
      return null;
    }
  }

  function postJSON(url, form, body) {
    const token = form.querySelector("[name=csrfmiddlewaretoken]").value;
    const headers = { "Content-Type": "application/json", "X-CSRFToken": token };
    return post(url, JSON.stringify(body), headers);
  }

  function registration(form) {
    const status = document.getElementById("passkey-status");
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      if (!window.PublicKeyCredential) {
        say(status, "This browser cannot use passkeys.", true);
        return;
      }
      const name = form.elements.name.value.trim();
      if (!name) {
        say(status, "Give the passkey a name.", true);
        form.elements.name.focus();
        return;
      }
      const password = form.elements.password ? form.elements.password.value : "";
      say(status, "Follow your browser's steps to create the passkey…");
      const options = await postJSON(form.dataset.optionsUrl, form, { password: password });
      if (refused(status, options)) return;
      const credential = await withPasskey(status, "No passkey was added", () =>
        navigator.credentials.create({ publicKey: creationOptions(options.body) }));
      if (!credential) return;
      const added = await postJSON(form.dataset.registerUrl, form, {
        name: name,
        credential: credentialJSON(credential),
      });
      if (!refused(status, added)) window.location.reload();
    });
  }

  function confirmRemoval(form) {
    form.addEventListener("submit", (event) => {
      if (!window.confirm(form.dataset.confirm)) event.preventDefault();
    });
  }

  // Ask the page for the challenge of the answer the form holds, sign it, then submit the
  // form with the assertion; the page checks it again and records nothing without it.
  function signing(form) {
    const status = document.getElementById("signature-status");
    form.addEventListener("submit", async (event) => {
      if (form.dataset.signed === "yes") return;
      event.preventDefault();
      const submitter = event.submitter;
      const body = new FormData(form, submitter);
      body.set("_action", "challenge");
      say(status, "Your passkey signs your decision: follow your browser's steps…");
      const options = await post(window.location.href, body);
      if (options.status === 400 && options.body.error === "invalid_response") {
        form.dataset.signed = "yes"; // nothing to sign: the page shows what to correct
        form.requestSubmit(submitter);
        return;
      }
      if (refused(status, options)) return;
      const credential = await withPasskey(status, "Not signed, so nothing was recorded", () =>
        navigator.credentials.get({ publicKey: requestOptions(options.body) }));
      if (!credential) return;
      form.elements.assertion.value = JSON.stringify(credentialJSON(credential));
      form.dataset.signed = "yes";
      say(status, "Signed; recording your decision…");
      form.requestSubmit(submitter);
    });
  }

  document.addEventListener("DOMContentLoaded", () => {
    const adding = document.getElementById("passkey-add");
    if (adding) registration(adding);
    document.querySelectorAll("form[data-confirm]").forEach(confirmRemoval);
    const decision = document.querySelector("form[data-signature=required]");
    if (decision) signing(decision);
  });
})();
