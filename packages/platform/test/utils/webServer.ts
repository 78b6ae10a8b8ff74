/**
 * A Web fetch handler served by a real Node HTTP server on a free loopback port, for the tests that
 * reach it as a client would (fetch, the CLI's process).
 */
import { listen } from "@effect-idempotency/test-support/Servers"
import * as Effect from "effect/Effect"
import * as Http from "node:http"

/** Serves `handler` until the scope closes; answers the server's base URL (`http://127.0.0.1:<port>`). */
export const serveWeb = (handler: (request: Request) => Promise<Response>) =>
  Effect.suspend(() => {
    const server = Http.createServer((incoming, outgoing) => {
      const chunks: Array<Buffer> = []
      incoming.on("data", (chunk: Buffer) => chunks.push(chunk))
      incoming.on("end", () => {
        const headers = new Headers()
        for (const [name, value] of Object.entries(incoming.headers)) {
          if (typeof value === "string") headers.set(name, value)
          else if (Array.isArray(value)) { for (const item of value) headers.append(name, item) }
        }
        const method = incoming.method ?? "GET"
        const body = method === "GET" || method === "HEAD" ? null : Buffer.concat(chunks)
        handler(new Request(`http://127.0.0.1${incoming.url ?? "/"}`, { method, headers, body }))
          .then(async (response) => {
            outgoing.writeHead(response.status, Object.fromEntries(response.headers))
            outgoing.end(Buffer.from(await response.arrayBuffer()))
          })
          .catch(() => {
            outgoing.writeHead(500)
            outgoing.end()
          })
      })
    })
    return Effect.map(listen(server), (port) => `http://127.0.0.1:${port}`)
  })
