// A short agent flow through a client generated from spec/openapi.json with
// openapi-typescript + openapi-fetch, run against a live server. It proves that the
// contract yields a usable typed SDK with third-party tools: the paths, parameters,
// bodies and responses below are type-checked by tsc against the generated types, so
// a contract change that breaks client code fails the build before anything runs.
//
// Environment (set by internal/contract/sdkts/sdk_ts_test.go):
//   AGENTBOX_SERVER         base URL of the server
//   AGENTBOX_BOX_KEY        the box both agents live in
//   AGENTBOX_API_KEY        key of the sending agent
//   AGENTBOX_PEER_API_KEY   key of the receiving agent
//   AGENTBOX_PEER_AGENT_ID  agent_id of the receiving agent
import { createHash } from "node:crypto";
import createClient, { type Client } from "openapi-fetch";
import type { components, paths } from "../generated/schema.js";

type ErrorBody = components["schemas"]["Error"];

function env(name: string): string {
  const v = process.env[name];
  if (!v) {
    throw new Error(`${name} is not set`);
  }
  return v;
}

const server = env("AGENTBOX_SERVER");
const box = env("AGENTBOX_BOX_KEY");
const runId = `${process.pid}-${Date.now()}`;

function client(key: string, session: string): Client<paths> {
  // Keys go only into the Authorization header; nothing below ever prints them.
  return createClient<paths>({
    baseUrl: server,
    headers: { Authorization: `Bearer ${key}`, "Agentbox-Session": session },
  });
}

function check(cond: unknown, what: string): asserts cond {
  if (!cond) {
    throw new Error(`check failed: ${what}`);
  }
}

// must returns the typed success body or fails with the typed error's code.
function must<T>(step: string, r: { data?: T; error?: ErrorBody; response: Response }): T {
  if (r.data === undefined) {
    throw new Error(`${step}: HTTP ${r.response.status} ${r.error?.error.code ?? "(no error body)"}: ${r.error?.error.message ?? ""}`);
  }
  console.log(`ok   ${step} (HTTP ${r.response.status})`);
  return r.data;
}

const sender = client(env("AGENTBOX_API_KEY"), `sdk-ts-sender-${runId}`);
const receiver = client(env("AGENTBOX_PEER_API_KEY"), `sdk-ts-receiver-${runId}`);
const path = { box_key: box };

// 1. Prime: every other call needs a primed session.
const primed = must("agent_prime", await sender.POST("/api/v1/boxes/{box_key}/prime", { params: { path }, body: {} }));
check(primed.agent.box_key === box, "prime returns the caller's box");
check(typeof primed.session.session_id === "string", "prime returns a session");
check(/^[0-9]{1,19}$/.test(primed.limits.settings_revision), "revisions are decimal strings");

// 2. Checkpoint: read, compare-and-set, read back, and a typed conflict.
const before = must("checkpoint_get", await sender.GET("/api/v1/boxes/{box_key}/checkpoint", { params: { path } }));
const state = { step: 3, note: "from the generated TypeScript client" };
const saved = must(
  "checkpoint_save",
  await sender.PUT("/api/v1/boxes/{box_key}/checkpoint", {
    params: { path },
    body: { expected_revision: before.revision, checkpoint: state, idempotency_key: `sdk-save-${runId}` },
  }),
);
check(saved.revision !== before.revision, "saving advances the revision");
const after = must("checkpoint_get (after save)", await sender.GET("/api/v1/boxes/{box_key}/checkpoint", { params: { path } }));
check(after.revision === saved.revision, "the saved revision is current");
check(JSON.stringify(after.checkpoint) === JSON.stringify(state), "the checkpoint round-trips");

const stale = await sender.PUT("/api/v1/boxes/{box_key}/checkpoint", {
  params: { path },
  body: { expected_revision: before.revision, checkpoint: {}, idempotency_key: `sdk-stale-${runId}` },
});
check(stale.response.status === 409, `a stale expected_revision is a conflict (got ${stale.response.status})`);
check(stale.error?.error.code === "REVISION_CONFLICT", "the error body is typed");
check(stale.error?.error.current_revision === saved.revision, "the conflict names the current revision");
console.log("ok   checkpoint_save with a stale revision → REVISION_CONFLICT");

// 3. Messaging: send a DM; the recipient lists its inbox and ACKs the row.
const peer = env("AGENTBOX_PEER_AGENT_ID");
const body = `hello from the generated client (${runId})`;
const receipt = must(
  "message_send",
  await sender.POST("/api/v1/boxes/{box_key}/messages", {
    params: { path },
    body: { destination: { kind: "dm", recipient_agent_id: peer }, body_md: body, idempotency_key: `sdk-send-${runId}` },
  }),
);
check(receipt.status === "sent" && typeof receipt.message_id === "string", "send returns a storage receipt");

must("agent_prime (recipient)", await receiver.POST("/api/v1/boxes/{box_key}/prime", { params: { path }, body: {} }));
const page = must(
  "inbox_list",
  await receiver.GET("/api/v1/boxes/{box_key}/inbox", { params: { path, query: { filter: "unread", limit: 10 } } }),
);
const row = page.items.find((r) => r.message.message_id === receipt.message_id);
check(row !== undefined, "the DM is in the recipient's inbox");
check(row!.message.body_md === body, "the body arrives exactly as sent");
check(row!.reasons === 1, "a plain DM has reason bit 1");
const acked = must(
  "inbox_ack",
  await receiver.POST("/api/v1/boxes/{box_key}/inbox/ack", {
    params: { path },
    body: { inbox_seqs: [row!.inbox_seq], idempotency_key: `sdk-ack-${runId}` },
  }),
);
check(acked.results[0]?.status === "acked", "the returned row is acknowledged");

// 4. Attachment: a multipart send (the JSON part is the same input object as the JSON form),
// the metadata in the recipient's view, and a streamed download checked against our own hash.
const fileBytes = new TextEncoder().encode(`attachment from the generated client (${runId})\n`);
const fileSha = createHash("sha256").update(fileBytes).digest("hex");
// The multipart body as the contract types it; `file` (format binary) is the part's filename
// here, and the serializer puts the bytes in.
type Upload = paths["/api/v1/boxes/{box_key}/messages"]["post"]["requestBody"]["content"]["multipart/form-data"];
const uploadBody: Upload = {
  input: { destination: { kind: "dm", recipient_agent_id: peer }, body_md: "", idempotency_key: `sdk-upload-${runId}` },
  file: "sdk.txt",
};
const upload = must(
  "message_send (multipart upload)",
  await sender.POST("/api/v1/boxes/{box_key}/messages", {
    params: { path },
    body: uploadBody,
    bodySerializer(b) {
      const u = b as Upload;
      const form = new FormData();
      form.append("input", new Blob([JSON.stringify(u.input)], { type: "application/json" }));
      form.append("file", new Blob([fileBytes], { type: "text/plain" }), u.file);
      return form;
    },
  }),
);
check(upload.status === "sent" && typeof upload.message_id === "string", "the upload is a sent message");
const withFile = must(
  "message_get (attachment metadata)",
  await receiver.GET("/api/v1/boxes/{box_key}/messages/{message_id}", { params: { path: { ...path, message_id: upload.message_id! } } }),
);
const att = withFile.attachment;
check(att !== undefined, "the message carries its attachment's metadata");
check(att!.sha256 === fileSha && att!.size_bytes === fileBytes.length && att!.name === "sdk.txt", "the server's SHA-256 and size are ours");
const dl = await receiver.GET("/api/v1/boxes/{box_key}/attachments/{attachment_id}", {
  params: { path: { ...path, attachment_id: att!.attachment_id } },
  parseAs: "stream",
});
check(dl.response.status === 200 && dl.data, `the recipient downloads the attachment (got ${dl.response.status})`);
check(dl.response.headers.get("Agentbox-Attachment-Sha256") === fileSha, "the download names its SHA-256");
const hash = createHash("sha256");
let got = 0;
for await (const chunk of dl.data as ReadableStream<Uint8Array>) {
  hash.update(chunk);
  got += chunk.length;
}
check(got === fileBytes.length && hash.digest("hex") === fileSha, "the downloaded bytes are the uploaded bytes");
console.log("ok   attachment_download (streamed, SHA-256 verified)");

console.log("sdk-ts flow: passed");
