import { listen } from "@effect-idempotency/test-support/Servers"
import { TcpProxy, Timing } from "@effect-idempotency/testing"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type { YieldWrap } from "effect/Utils"
import * as Net from "node:net"

/** A server on loopback that answers every chunk with `echo:<chunk>`, and records what it got. */
const echoServer = Effect.gen(function*() {
  const received: Array<string> = []
  const sockets = new Set<Net.Socket>()
  const server = Net.createServer((socket) => {
    sockets.add(socket)
    socket.on("data", (data) => {
      received.push(data.toString())
      socket.write(`echo:${data.toString()}`)
    })
    socket.on("close", () => sockets.delete(socket))
    socket.on("error", () => {})
  })
  const port = yield* listen(server, () => {
    for (const socket of sockets) socket.destroy()
  })
  return { port, received: () => received.join("") }
})

interface Client {
  readonly write: (text: string) => Effect.Effect<void>
  readonly received: () => string
  /** How the connection ended, if it did. */
  readonly ended: () => "closed" | "reset" | undefined
}

const connect = (port: number): Effect.Effect<Client, never, Scope.Scope> =>
  Effect.gen(function*() {
    const chunks: Array<string> = []
    let ended: "closed" | "reset" | undefined = undefined
    const socket = yield* Effect.acquireRelease(
      Effect.async<Net.Socket>((resume) => {
        // a connection reset at once may close before it reports that it connected
        const socket = Net.connect(port, "127.0.0.1", () => resume(Effect.succeed(socket)))
        socket.on("data", (data) => chunks.push(data.toString()))
        socket.on("error", (error: NodeJS.ErrnoException) => {
          if (error.code === "ECONNRESET") ended = "reset"
        })
        socket.on("close", () => {
          ended ??= "closed"
          resume(Effect.succeed(socket))
        })
      }),
      (socket) => Effect.sync(() => socket.destroy())
    )
    return {
      write: (text) => Effect.sync(() => void socket.write(text)),
      received: () => chunks.join(""),
      ended: () => ended
    }
  })

/** Polls `condition` (bounded) until it holds. */
const eventually = (condition: () => boolean, message: string) => Timing.eventually(Effect.sync(condition), message)

/** Gives the sockets time to deliver whatever they would (when nothing must arrive). */
const quiet = Effect.sleep("100 millis")

/** A test through a proxy in front of an echo server; the body is a generator, as `Effect.gen` takes. */
const proxyTest = (
  name: string,
  body: (
    proxy: TcpProxy.TcpProxy,
    server: Effect.Effect.Success<typeof echoServer>
  ) => Generator<YieldWrap<Effect.Effect<unknown, unknown, Scope.Scope>>, void, unknown>
) =>
  it.scopedLive(name, () =>
    Effect.gen(function*() {
      const server = yield* echoServer
      yield* body(yield* TcpProxy.make({ host: "127.0.0.1", port: server.port }), server)
    }))

describe("TcpProxy", () => {
  proxyTest("forwards both ways", function*(proxy) {
    const client = yield* connect(proxy.port)
    yield* client.write("a")
    yield* eventually(() => client.received() === "echo:a", "no answer")
    assert.strictEqual(yield* proxy.connections, 1)
  })

  proxyTest("stall holds every byte with both sockets open; resume delivers them in order", function*(proxy, server) {
    const open = yield* connect(proxy.port)
    yield* proxy.stall()
    const later = yield* connect(proxy.port)
    yield* open.write("1")
    yield* open.write("2")
    yield* later.write("3")
    yield* quiet
    assert.strictEqual(server.received(), "")
    assert.strictEqual(open.ended(), undefined)
    assert.strictEqual(later.ended(), undefined)
    assert.deepStrictEqual(yield* proxy.held, { requests: 3, answers: 0 })

    yield* proxy.resume
    yield* eventually(() => open.received() === "echo:12" || open.received() === "echo:1echo:2", "not delivered")
    yield* eventually(() => later.received() === "echo:3", "not delivered")
  })

  proxyTest("stall of answers only: requests reach the server, answers wait for resume", function*(proxy, server) {
    const client = yield* connect(proxy.port)
    yield* proxy.stall({ hold: "answers" })
    yield* client.write("x")
    yield* eventually(() => server.received() === "x", "the request did not reach the server")
    yield* quiet
    assert.strictEqual(client.received(), "")
    assert.deepStrictEqual(yield* proxy.held, { requests: 0, answers: 6 })
    yield* proxy.resume
    yield* eventually(() => client.received() === "echo:x", "the answer was not delivered")
  })

  proxyTest(
    "an armed stall starts with the request it waits for: earlier bytes flow, that answer is held",
    function*(proxy, server) {
      const client = yield* connect(proxy.port)
      yield* proxy.stall({ hold: "answers", when: (bytes) => Buffer.from(bytes).includes("COMMIT") })
      yield* client.write("a")
      yield* eventually(() => client.received() === "echo:a", "a request before the trigger was held")
      yield* client.write("COMMIT")
      yield* eventually(() => server.received() === "aCOMMIT", "the trigger did not reach the server")
      yield* quiet
      assert.strictEqual(client.received(), "echo:a")
      assert.deepStrictEqual(yield* proxy.held, { requests: 0, answers: "echo:COMMIT".length })
      yield* proxy.resume
      yield* eventually(() => client.received() === "echo:aecho:COMMIT", "the held answer was not delivered")
    }
  )

  proxyTest("stall of open connections only: a new connection flows", function*(proxy) {
    const stalled = yield* connect(proxy.port)
    yield* proxy.stall({ connections: "open" })
    const healthy = yield* connect(proxy.port)
    yield* stalled.write("s")
    yield* healthy.write("h")
    yield* eventually(() => healthy.received() === "echo:h", "the new connection stalled")
    assert.strictEqual(stalled.received(), "")
  })

  proxyTest("refuse resets every connection until resume; the port stays the same", function*(proxy) {
    const open = yield* connect(proxy.port)
    yield* proxy.refuse
    yield* eventually(() => open.ended() !== undefined, "the open connection was not reset")
    const refused = yield* connect(proxy.port)
    yield* eventually(() => refused.ended() === "reset", "a new connection was not reset")
    yield* proxy.resume
    const accepted = yield* connect(proxy.port)
    yield* accepted.write("y")
    yield* eventually(() => accepted.received() === "echo:y", "no answer after resume")
  })

  proxyTest("cut closes the open connections; new ones flow", function*(proxy) {
    const open = yield* connect(proxy.port)
    yield* proxy.stall()
    yield* proxy.cut
    yield* eventually(() => open.ended() !== undefined, "the open connection was not closed")
    assert.strictEqual(yield* proxy.connections, 0)
    const next = yield* connect(proxy.port)
    yield* next.write("z")
    yield* eventually(() => next.received() === "echo:z", "a new connection did not flow")
  })
})
