// `services.secret` and btoa's check (spec §10.1), a lazy part of prelude.js: set up in
// the attempt's context the first time the script calls either. The attempt knows the
// NAMES of the secrets set, never their values: a reference is a plain string the
// kernel replaces by the value when it sends a request. `I` holds the intrinsics
// prelude.js captured before the script ran.
(function (I) {
  "use strict";
  const { apply, join, stringify, indexOf, toUpperCase, TypeErrorCtor, StringCtor } = I;
  const SECRET_OPEN = "\u27e6woml-secret:";
  const SECRET_CLOSE = "\u27e7";
  const SECRET_OPEN_ENCODED = "%E2%9F%A6WOML-SECRET%3A";
  const SECRET_HOW = ". Set one with %woml secret NAME, Woml.secrets, or "
    + "wm.run(..., secrets={...})";

  // services.secret(...args) of an attempt given `secretNames`: answered here.
  function secret(secretNames, args) {
    const n = args.length === 1 ? args[0] : undefined;
    if (typeof n !== "string") {
      throw new TypeErrorCtor("services.secret(name) takes the name of a secret as a "
        + 'string, e.g. services.secret("STRIPE")');
    }
    let known = false;
    for (let i = 0; i < secretNames.length; i++) {
      if (secretNames[i] === n) known = true;
    }
    if (!known) {
      const listing = secretNames.length === 0 ? "no secrets are set"
        : "the secrets set are: " + apply(join, secretNames, [", "]);
      const quoted = stringify(n);
      throw new TypeErrorCtor("services.secret(" + quoted + "): no secret " + quoted
        + "; " + listing + SECRET_HOW);
    }
    return SECRET_OPEN + n + SECRET_CLOSE;
  }

  // btoa of a reference would base64 the reference's own text, which no server can
  // read: the value exists only in the kernel, when the request is sent. So it is
  // refused, with the way to send what it is almost always for: HTTP Basic auth.
  // (Captured string methods, not a RegExp: RegExp.prototype.exec is the script's.)
  // The text btoa may encode, else throws.
  function btoaText(data) {
    const text = StringCtor(data);
    if (apply(indexOf, text, [SECRET_OPEN]) !== -1 || apply(indexOf,
      apply(toUpperCase, text, []), [SECRET_OPEN_ENCODED]) !== -1) {
      throw new TypeErrorCtor("btoa() cannot encode a secret reference (its value "
        + "exists only in the kernel, when a request is sent); for HTTP Basic auth put "
        + 'the reference in the URL\'s userinfo, url: "https://alice:" + '
        + 'services.secret("PW") + "@api.example.com/", and the kernel sends '
        + "Authorization: Basic with the value");
    }
    return text;
  }

  return { __proto__: null, secret, btoaText };
})
