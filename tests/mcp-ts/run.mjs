// Drives agentbox's /mcp with the official TypeScript MCP SDK clients, once per protocol
// version: @modelcontextprotocol/sdk 1.x for 2024-11-05 .. 2025-11-25 (its initialize is
// pinned to each version), @modelcontextprotocol/client 2.x for 2026-07-28 (server/discover).
// Env: MCP_URL, MCP_KEY (an agent key), BOX_KEY. Prints one JSON line per version and exits
// non-zero when any check fails. Run by TestTypeScriptSDK (internal/mcpserver/mcphttp).
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Client as ClientV2, StreamableHTTPClientTransport as TransportV2 } from '@modelcontextprotocol/client';

const url = new URL(process.env.MCP_URL);
const key = process.env.MCP_KEY;
const box = process.env.BOX_KEY;
const legacy = ['2024-11-05', '2025-03-26', '2025-06-18', '2025-11-25'];
const modern = ['2026-07-28'];

function check(cond, what) {
  if (!cond) throw new Error(what);
}

function headers(version) {
  return { Authorization: `Bearer ${key}`, 'Agentbox-Session': `ts-${version}` };
}

// pinInitialize makes the 1.x client ask for exactly `version` in initialize.
function pinInitialize(transport, version) {
  const send = transport.send.bind(transport);
  transport.send = (msg, opts) => {
    if (msg.method === 'initialize') msg = { ...msg, params: { ...msg.params, protocolVersion: version } };
    return send(msg, opts);
  };
  return transport;
}

function mirror(res, name) {
  check(Array.isArray(res.content) && res.content.length === 1 && res.content[0].type === 'text', `${name}: one text content block`);
  return JSON.parse(res.content[0].text);
}

async function exercise(client, version, negotiated) {
  check(negotiated === version, `negotiated ${negotiated}, want ${version}`);
  check((client.getInstructions() ?? '').includes('agent_prime'), 'instructions mention agent_prime');
  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name);
  check(names.includes('agent_prime') && names.includes('checkpoint_get'), `tools/list: ${names}`);
  check(!names.includes('rooms_list'), 'the alias rooms_list is not listed');
  for (const t of tools) {
    check(t.annotations && ['readOnlyHint', 'destructiveHint', 'idempotentHint', 'openWorldHint'].every((h) => typeof t.annotations[h] === 'boolean'), `${t.name}: explicit annotations`);
    check(t.inputSchema.additionalProperties === false, `${t.name}: closed input schema`);
  }

  const prime = await client.callTool({ name: 'agent_prime', arguments: { box_key: box } });
  check(!prime.isError, `agent_prime: ${JSON.stringify(prime)}`);
  // Every client reads the text mirror; it is the whole result.
  const primed = mirror(prime, 'agent_prime');
  check(primed.agent && primed.session && primed.session.session_id, 'agent_prime result in the text mirror');
  if (prime.structuredContent !== undefined) {
    check(JSON.stringify(prime.structuredContent) === JSON.stringify(primed), 'structuredContent equals the text mirror');
  }

  const got = await client.callTool({ name: 'checkpoint_get', arguments: { box_key: box } });
  check(!got.isError && typeof mirror(got, 'checkpoint_get').revision === 'string', `checkpoint_get: ${JSON.stringify(got)}`);

  // A tool error reaches the client as a result (isError, structuredContent.error, one-line
  // summary), even though this client validates structuredContent against outputSchema.
  const bad = await client.callTool({ name: 'checkpoint_save', arguments: { box_key: box, expected_revision: '0', checkpoint: {}, idempotency_key: `ts-${version}`, extra: 1 } });
  check(bad.isError === true, `unknown field: ${JSON.stringify(bad)}`);
  check(bad.structuredContent?.error?.code === 'INVALID_ARGUMENT' && bad.structuredContent.error.field === 'extra', `error object: ${JSON.stringify(bad.structuredContent)}`);
  check(!bad.content[0].text.includes('\n') && bad.content[0].text.startsWith('INVALID_ARGUMENT'), `summary: ${bad.content[0].text}`);

  // An alias is accepted by tools/call.
  const alias = await client.callTool({ name: 'rooms_list', arguments: { box_key: box } });
  check(!alias.isError || alias.structuredContent?.error?.reason === 'not_implemented', `rooms_list: ${JSON.stringify(alias)}`);

  // An unknown tool is a protocol error, not a result.
  let threw = false;
  try {
    const r = await client.callTool({ name: 'no_such_tool', arguments: {} });
    threw = r.isError === true && /unknown tool/i.test(r.content?.[0]?.text ?? '');
  } catch {
    threw = true;
  }
  check(threw, 'unknown tool is an error');
  return tools.length;
}

let failed = false;
for (const version of legacy) {
  const client = new ClientV1({ name: 'agentbox-ts-v1', version: '1' });
  try {
    await client.connect(pinInitialize(new TransportV1(url, { requestInit: { headers: headers(version) } }), version));
    const tools = await exercise(client, version, client.transport?.protocolVersion ?? version);
    console.log(JSON.stringify({ version, sdk: '@modelcontextprotocol/sdk', ok: true, tools }));
  } catch (e) {
    failed = true;
    console.log(JSON.stringify({ version, sdk: '@modelcontextprotocol/sdk', ok: false, error: String(e?.stack ?? e) }));
  } finally {
    await client.close().catch(() => {});
  }
}
for (const version of modern) {
  const client = new ClientV2({ name: 'agentbox-ts-v2', version: '1' }, { versionNegotiation: { mode: { pin: version } } });
  try {
    await client.connect(new TransportV2(url, { requestInit: { headers: headers(version) } }));
    const tools = await exercise(client, version, client.getNegotiatedProtocolVersion());
    console.log(JSON.stringify({ version, sdk: '@modelcontextprotocol/client', ok: true, tools }));
  } catch (e) {
    failed = true;
    console.log(JSON.stringify({ version, sdk: '@modelcontextprotocol/client', ok: false, error: String(e?.stack ?? e) }));
  } finally {
    await client.close().catch(() => {});
  }
}
process.exit(failed ? 1 : 0);
