// Runs statements through node-postgres in the extended protocol with binary results, one
// connection per file, and prints one JSON line per statement: what the driver handed back
// (fields, raw row values, command, row count, notices) or its error. The integration test
// runs it straight against PostgreSQL and through pgwarden and compares the lines.
//   node regress_client.mjs CONNECTION_JSON STATEMENTS_JSON OUTPUT
// STATEMENTS_JSON: [{"file": name, "statements": [[index, text], ...]}, ...]; OUTPUT gets the
// lines.
import { closeSync, openSync, readFileSync, writeSync } from 'node:fs'
import pg from 'pg'

const connection = JSON.parse(process.argv[2])
const files = JSON.parse(readFileSync(process.argv[3], 'utf8'))
const output = openSync(process.argv[4], 'w')
// Every value as the server sent it: text, or a Buffer for binary, shown as hex.
const raw = { getTypeParser: () => (value) => value }
const show = (v) => (v === null ? null : Buffer.isBuffer(v) ? '\\x' + v.toString('hex') : v)

function errorFacts (e) {
  const facts = { error: e.code ?? null, message: e.message }
  for (const k of ['severity', 'detail', 'hint', 'position', 'where', 'schema', 'table', 'column',
    'constraint', 'routine']) {
    if (e[k] !== undefined) facts[k] = e[k]
  }
  return facts
}

for (const { file, statements } of files) {
  let client = null
  const notices = []
  const connect = async () => {
    client = new pg.Client({ ...connection, types: raw })
    client.on('notice', (n) => notices.push(`${n.code} ${n.message}`))
    client.on('error', () => {})
    await client.connect()
  }
  await connect()
  for (const [i, text] of statements) {
    let out
    try {
      const r = await client.query({ text, queryMode: 'extended', binary: true,
        rowMode: 'array', types: raw })
      const results = Array.isArray(r) ? r : [r]
      out = results.map((x) => ({
        command: x.command,
        rowCount: x.rowCount,
        fields: (x.fields || []).map((f) => `${f.name}:${f.dataTypeID}:${f.format}`),
        rows: (x.rows || []).map((row) => row.map(show))
      }))
    } catch (e) {
      out = errorFacts(e)
    }
    writeSync(output, JSON.stringify({ file, i, out, notices: notices.splice(0) }) + '\n')
    if (!client._connected || client._ending || client.connection.stream.destroyed) {
      try { await client.end() } catch {}
      await connect()
    }
  }
  await client.end()
}
closeSync(output)
