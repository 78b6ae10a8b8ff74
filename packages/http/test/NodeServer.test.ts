/**
 * `IdempotentFetch` behind a real Node HTTP server on loopback, through a small adapter
 * (`IncomingMessage` to a `Request` with a streaming body, the `Response` back to the
 * `ServerResponse`), called by a keep-alive client that holds a single connection: a body past
 * `maxBodyBytes` gets its 413, and the request after it gets its own answer.
 */
import { IdempotencyStore } from "@effect-idempotency/core"
import { IdempotentFetch } from "@effect-idempotency/http"
import { listen } from "@effect-idempotency/test-support/Servers"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Http from "node:http"
import { Readable } from "node:stream"

/** How an adapter streams the request's body into the `Request`. */
const bodies = {
  // as adapters commonly do: the body is read ahead into the stream, and a cancel detaches the request
  "Readable.toWeb": (incoming: Http.IncomingMessage) =>
    Readable.toWeb(incoming) as unknown as ReadableStream<Uint8Array>,
  // read on demand; a cancel destroys the request, and its socket with it
  "a pulled stream": (incoming: Http.IncomingMessage) => {
    const chunks = incoming[Symbol.asyncIterator]()
    return new ReadableStream<Uint8Array>({
      async pull(controller) {
        const next = await chunks.next()
        if (next.done === true) controller.close()
        else controller.enqueue(new Uint8Array(next.value as Buffer))
      },
      cancel() {
        incoming.destroy()
      }
    })
  }
}

/** Serves `handler` on 127.0.0.1 for the life of the scope; resolves to the port. */
const serve = (
  handler: IdempotentFetch.Handler,
  body: (incoming: Http.IncomingMessage) => ReadableStream<Uint8Array>
) =>
  Effect.suspend(() => {
    const server = Http.createServer(async (incoming, outgoing) => {
      const headers = new Headers()
      for (const [name, value] of Object.entries(incoming.headers)) {
        if (typeof value === "string") headers.set(name, value)
      }
      const response = await handler(
        new Request(`http://${incoming.headers.host}${incoming.url}`, {
          method: incoming.method!,
          headers,
          body: body(incoming),
          duplex: "half"
        } as RequestInit)
      )
      outgoing.writeHead(response.status, Object.fromEntries(response.headers))
      outgoing.end(new Uint8Array(await response.arrayBuffer()))
    })
    return listen(server, () => server.closeAllConnections())
  })

interface Reply {
  readonly status: number
  readonly connection: string | undefined
  readonly text: string
}

/** A POST on `agent`'s connection; a reset, or no answer within 5 seconds, fails the test. */
const post = (
  agent: Http.Agent,
  port: number,
  init: { readonly key: string | undefined; readonly body: string; readonly chunked?: boolean }
) =>
  Effect.async<Reply, Error>((resume) => {
    let settled = false
    const settle = (effect: Effect.Effect<Reply, Error>) => {
      if (settled) return
      settled = true
      resume(effect)
    }
    const request = Http.request({
      host: "127.0.0.1",
      port,
      path: "/orders",
      method: "POST",
      agent,
      headers: {
        "content-type": "application/json",
        ...(init.key === undefined ? {} : { "idempotency-key": init.key }),
        ...(init.chunked === true
          ? { "transfer-encoding": "chunked" }
          : { "content-length": String(Buffer.byteLength(init.body)) })
      }
    }, (response) => {
      const chunks: Array<Buffer> = []
      response.on("data", (chunk: Buffer) => chunks.push(chunk))
      response.on("end", () =>
        settle(Effect.succeed({
          status: response.statusCode!,
          connection: response.headers.connection,
          text: Buffer.concat(chunks).toString()
        })))
    })
    // the server may close while the rest of a refused body is still being written
    request.on("error", (error) => settle(Effect.fail(error)))
    request.end(init.body)
    return Effect.sync(() => request.destroy())
  }).pipe(
    Effect.timeoutFail({ duration: "5 seconds", onTimeout: () => new Error(`no answer to ${init.key} in 5 seconds`) })
  )

const order = { sku: "A-1", quantity: 2 }
// 256 KiB: more than the socket's buffers and the stream's read-ahead hold
const large = JSON.stringify({ ...order, note: "x".repeat(256 * 1024) })

/** The handler `make` builds, served for the life of the scope, and a keep-alive agent of one socket. */
const servedOnOneSocket = (make: () => IdempotentFetch.Handler, body: (typeof bodies)[keyof typeof bodies]) =>
  Effect.gen(function*() {
    const handler = yield* Effect.acquireRelease(
      Effect.sync(make),
      (handler) => Effect.promise(() => handler.dispose())
    )
    const port = yield* serve(handler, body)
    const agent = yield* Effect.acquireRelease(
      Effect.sync(() => new Http.Agent({ keepAlive: true, maxSockets: 1 })),
      (agent) => Effect.sync(() => agent.destroy())
    )
    return { port, agent }
  })

describe("IdempotentFetch behind a Node HTTP server, on a keep-alive connection", () => {
  for (const [name, body] of Object.entries(bodies)) {
    for (const chunked of [false, true]) {
      const declared = chunked ? "a chunked body" : "a declared Content-Length"
      it.scopedLive(`${name}: ${declared} past maxBodyBytes gets 413 and closes; the next request is answered`, () =>
        Effect.gen(function*() {
          let executions = 0
          const { agent, port } = yield* servedOnOneSocket(() =>
            IdempotentFetch.wrap(async (request) => {
              executions++
              return Response.json(await request.json(), { status: 201 })
            }, { layer: IdempotencyStore.layerMemoryWith({ warn: false }), maxBodyBytes: 1024 }), body)
          const refused = yield* post(agent, port, { key: "key-large", body: large, chunked })
          assert.strictEqual(refused.status, 413)
          const next = yield* post(agent, port, { key: "key-next", body: JSON.stringify(order) })
          assert.strictEqual(next.status, 201)
          assert.deepStrictEqual(JSON.parse(next.text), order)
          assert.strictEqual(executions, 1)
          // the rest of the refused body was never read: its connection was not kept
          assert.strictEqual(refused.connection, "close")
        }))

      it.scopedLive(`${name}: ${declared} refused before it is read (no key) gets 400 and closes; the next request is answered`, () =>
        Effect.gen(function*() {
          const { agent, port } = yield* servedOnOneSocket(
            () =>
              IdempotentFetch.wrap(async (request) => Response.json(await request.json(), { status: 201 }), {
                layer: IdempotencyStore.layerMemoryWith({ warn: false }),
                required: true
              }),
            body
          )
          const refused = yield* post(agent, port, { key: undefined, body: large, chunked })
          assert.strictEqual(refused.status, 400)
          assert.strictEqual(refused.connection, "close")
          const next = yield* post(agent, port, { key: "key-next", body: JSON.stringify(order) })
          assert.strictEqual(next.status, 201)
        }))
    }
  }
})
