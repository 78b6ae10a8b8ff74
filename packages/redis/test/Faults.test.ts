/**
 * Connection faults, on a `redis-server` of this file's own (it is paused, killed and restarted):
 * a closed port, `CLIENT KILL` of the store's connection while calls are in flight and while the
 * downstream runs, a server restart, and a server that stops answering (a proxy that holds every
 * byte without closing anything). Each surfaces as a typed `StoreUnavailable` within a bounded
 * time, never a defect; the downstream is not called without a reservation; the next attempt
 * after recovery proceeds normally. An interrupted call returns at once, sends nothing later, and
 * never disturbs another call on the same connection.
 */
import { IdempotencyStore } from "@effect-idempotency/core"
import type { RedisStore } from "@effect-idempotency/redis"
import { RedisClient } from "@effect-idempotency/redis"
import * as Counting from "@effect-idempotency/test-support/Counting"
import type { RedisServer } from "@effect-idempotency/test-support/Redis"
import { redisServer, requireRedisServer } from "@effect-idempotency/test-support/Redis"
import { freePort } from "@effect-idempotency/test-support/Servers"
import * as StoreFaults from "@effect-idempotency/test-support/StoreFaults"
import { TcpProxy, Timing } from "@effect-idempotency/testing"
import { assert, layer } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import type { Redis } from "ioredis"
import { randomUUID } from "node:crypto"
import {
  expectFailure,
  expectReserved,
  freshId,
  rawClient,
  recordKey,
  reserveRequest,
  storeLayer,
  uniquePrefix
} from "./utils/fixtures.js"

const PREFIX = uniquePrefix("faults")

const { payload } = Counting

class Server extends Context.Tag("test/Server")<Server, RedisServer>() {}

const ServerLive = Layer.scoped(Server, Effect.flatMap(requireRedisServer, (binary) => redisServer(binary)))

/** A store (and its client) on 127.0.0.1:`port`, built in the test's scope. */
const storeAt = (
  port: number,
  options?: {
    readonly connectionName?: string
    readonly commandTimeout?: Duration.DurationInput
    readonly store?: RedisStore.Options
  }
) =>
  Effect.gen(function*() {
    const context = yield* Layer.build(
      storeLayer(
        { prefix: PREFIX, ...options?.store },
        RedisClient.layer({
          host: "127.0.0.1",
          port,
          connectionName: options?.connectionName ?? "idem-faults",
          ...RedisClient.recommendedOptions({ commandTimeout: options?.commandTimeout })
        })
      )
    )
    return {
      context,
      store: Context.get(context, IdempotencyStore.IdempotencyStore),
      client: Context.get(context, RedisClient.RedisClient).client as Redis
    }
  })

/** The client ids of the connections named `name`. */
const clientIds = (admin: Redis, name: string) =>
  Effect.map(
    Effect.promise(() => admin.client("LIST") as Promise<string>),
    (list) =>
      list.split("\n").filter((line) => line.includes(` name=${name} `)).map((line) => /^id=(\d+)/.exec(line)![1]!)
  )

/** Commands sent and not yet answered on an ioredis connection. */
const inFlight = (client: Redis) =>
  (client as unknown as { readonly commandQueue: { readonly length: number } }).commandQueue.length

layer(ServerLive, { excludeTestServices: true, timeout: "2 minutes" })("RedisStore faults", (it) => {
  it.scoped("a closed port: StoreUnavailable at once, no downstream call; a server that appears there is used", () =>
    Effect.gen(function*() {
      const binary = yield* requireRedisServer
      const port = yield* freePort
      const { context, store } = yield* storeAt(port)
      const { executions, operation } = yield* Counting.operation("faults")
      const key = randomUUID()
      const run = operation.runDetailed({ key, payload }).pipe(Effect.provide(context))

      const { exit, millis: elapsed } = yield* Timing.timed(run)
      expectFailure(exit, "StoreUnavailable", "reserve")
      assert.isBelow(elapsed, 3_000)
      assert.strictEqual(yield* Ref.get(executions), 0)
      const id = freshId()
      expectFailure(yield* Effect.exit(store.get(id)), "StoreUnavailable", "get")
      expectFailure(yield* Effect.exit(store.release({ id, token: "t" })), "StoreUnavailable", "release")

      // the server appears on that port: the client connects, and the next attempt proceeds
      yield* redisServer(binary, { port })
      const fresh = yield* run
      assert.isFalse(fresh.replayed)
      assert.strictEqual(fresh.value, 1)
      assert.isTrue((yield* run).replayed)
      assert.strictEqual(yield* Ref.get(executions), 1)
    }))

  it.scoped("a call interrupted while no server answers returns at once and sends nothing later", () =>
    Effect.gen(function*() {
      const binary = yield* requireRedisServer
      const port = yield* freePort
      const { client, store } = yield* storeAt(port)
      const id = freshId()
      const waiting = yield* Effect.fork(store.reserve(reserveRequest(id)))
      yield* Effect.sleep("100 millis")
      const { millis: interruptMillis } = yield* Timing.timed(Fiber.interrupt(waiting))
      assert.isBelow(interruptMillis, 50)

      const server = yield* redisServer(binary, { port })
      yield* Timing.eventually(Effect.sync(() => client.status === "ready"), "the client connects to the new server")
      assert.isTrue(Option.isNone(yield* store.get(freshId())))
      yield* Effect.sleep("200 millis")
      const admin = yield* rawClient(server.url)
      assert.strictEqual(yield* Effect.promise(() => admin.exists(recordKey(PREFIX, id))), 0)
    }))

  it.scoped("CLIENT KILL while reservations are in flight: StoreUnavailable, no downstream call, then recovery", () =>
    Effect.gen(function*() {
      const server = yield* Server
      const admin = yield* rawClient(server.url)
      const { client, context } = yield* storeAt(server.port, { connectionName: "idem-faults-kill" })
      const { executions, operation } = yield* Counting.operation("faults")
      const run = (key: string) => operation.runDetailed({ key, payload }).pipe(Effect.provide(context))
      yield* run(randomUUID())
      const before = yield* Ref.get(executions)

      // the server holds every script sent from now (CLIENT PAUSE WRITE), but still serves CLIENT KILL
      yield* Effect.promise(() => admin.call("CLIENT", "PAUSE", "10000", "WRITE"))
      const keys = Array.from({ length: 10 }, () => randomUUID())
      const attempts = yield* Effect.fork(
        Effect.all(keys.map((key) => Effect.exit(run(key))), { concurrency: "unbounded" })
      )
      yield* Timing.eventually(Effect.sync(() => inFlight(client) === keys.length), "every reservation is in flight")
      const ids = yield* clientIds(admin, "idem-faults-kill")
      assert.strictEqual(ids.length, 1)
      yield* Effect.promise(() => admin.call("CLIENT", "KILL", "ID", ids[0]!))
      const exits = yield* Fiber.join(attempts)
      for (const exit of exits) expectFailure(exit, "StoreUnavailable", "reserve")
      assert.strictEqual(yield* Ref.get(executions), before)
      yield* Effect.promise(() => admin.call("CLIENT", "UNPAUSE"))

      // the killed connection's scripts never ran; the client reconnected
      const ops = keys.map((key) => `${PREFIX}{${encodeURIComponent(operation.name)}#${key}}`)
      assert.strictEqual(yield* Effect.promise(() => admin.exists(...ops)), 0)
      const fresh = yield* Effect.forEach(keys, run, { concurrency: 5 })
      assert.isTrue(fresh.every((result) => !result.replayed))
      assert.strictEqual(yield* Ref.get(executions), before + keys.length)
    }))

  it.scoped("CLIENT KILL during the downstream call: the completion waits for the reconnection and is recorded", () =>
    Effect.gen(function*() {
      const server = yield* Server
      const admin = yield* rawClient(server.url)
      const { context } = yield* storeAt(server.port, { connectionName: "idem-faults-kill-downstream" })
      yield* StoreFaults.recordedDespite(
        context,
        Effect.flatMap(
          clientIds(admin, "idem-faults-kill-downstream"),
          (ids) => Effect.promise(() => admin.call("CLIENT", "KILL", "ID", ids[0]!))
        )
      )
    }))

  it.scoped("a server restart: StoreUnavailable while it is down, then the store reconnects and resends its scripts", () =>
    Effect.gen(function*() {
      const server = yield* Server
      const { context } = yield* storeAt(server.port)
      const { executions, operation } = yield* Counting.operation("faults")
      const run = (key: string) => operation.runDetailed({ key, payload }).pipe(Effect.provide(context))
      yield* run(randomUUID())

      yield* server.stop
      const key = randomUUID()
      const { exit, millis: elapsed } = yield* Timing.timed(run(key))
      expectFailure(exit, "StoreUnavailable", "reserve")
      assert.isBelow(elapsed, 3_000)
      assert.strictEqual(yield* Ref.get(executions), 1)

      // a new process: no data, no scripts (EVALSHA meets NOSCRIPT, EVAL follows)
      yield* server.start
      const fresh = yield* run(key)
      assert.isFalse(fresh.replayed)
      assert.isTrue((yield* run(key)).replayed)
      assert.strictEqual(yield* Ref.get(executions), 2)
    }))

  it.scoped("a server that stops answering (no RST, no FIN): StoreUnavailable after commandTimeout", () =>
    Effect.gen(function*() {
      const server = yield* Server
      const proxy = yield* TcpProxy.make({ host: "127.0.0.1", port: server.port })
      const { context } = yield* storeAt(proxy.port, { commandTimeout: "300 millis" })
      const { executions, operation } = yield* Counting.operation("faults")
      const run = (key: string) => operation.runDetailed({ key, payload }).pipe(Effect.provide(context))
      yield* run(randomUUID())

      yield* proxy.stall()
      const { exit, millis: elapsed } = yield* Timing.timed(run(randomUUID()))
      expectFailure(exit, "StoreUnavailable", "reserve")
      assert.isTrue(elapsed >= 290 && elapsed < 1_500, `${elapsed} ms`)
      assert.isAbove((yield* proxy.held).requests, 0)
      assert.strictEqual(yield* Ref.get(executions), 1)

      // the silent connection is closed (socketTimeout) and reconnected; once the server answers,
      // calls proceed (a call sent as the old connection closed may fail, and may have reserved its key)
      yield* proxy.resume
      let result = yield* Effect.exit(run(randomUUID()))
      for (let i = 0; i < 20 && Exit.isFailure(result); i++) {
        yield* Effect.sleep("100 millis")
        result = yield* Effect.exit(run(randomUUID()))
      }
      assert.isTrue(Exit.isSuccess(result) && !result.value.replayed)
      assert.strictEqual(yield* Ref.get(executions), 2)
    }))

  it.scoped("with the default timeouts, a silent server fails a call within 2 seconds and a bit", () =>
    Effect.gen(function*() {
      const server = yield* Server
      const proxy = yield* TcpProxy.make({ host: "127.0.0.1", port: server.port })
      const { store } = yield* storeAt(proxy.port)
      yield* store.get(freshId())
      yield* proxy.stall()
      const { exit, millis: elapsed } = yield* Timing.timed(store.reserve(reserveRequest(freshId())))
      expectFailure(exit, "StoreUnavailable", "reserve")
      const bound = Duration.toMillis(RedisClient.defaultCommandTimeout)
      assert.isTrue(elapsed >= bound - 10 && elapsed < bound + 1_000, `${elapsed} ms`)
    }))

  it.scoped("an interrupted call returns at once and never disturbs another call on the same connection", () =>
    Effect.gen(function*() {
      const server = yield* Server
      const proxy = yield* TcpProxy.make({ host: "127.0.0.1", port: server.port })
      const { store } = yield* storeAt(proxy.port, { commandTimeout: "10 seconds" })
      yield* store.get(freshId())

      yield* proxy.stall()
      const a = reserveRequest(freshId())
      const first = yield* Effect.fork(store.reserve(a))
      yield* Timing.eventually(
        Effect.map(proxy.held, (held) => held.requests > 0),
        "the first reservation reached the proxy"
      )
      const { millis: interruptMillis } = yield* Timing.timed(Fiber.interrupt(first))
      assert.isBelow(interruptMillis, 50)

      const b = reserveRequest(freshId())
      const second = yield* Effect.fork(store.reserve(b))
      yield* Effect.sleep("50 millis")
      yield* proxy.resume
      // the second call gets its own reply, not the first one's
      const reserved = expectReserved(yield* Fiber.join(second))
      assert.strictEqual(reserved.token, b.token)
      assert.strictEqual(Option.getOrThrow(yield* store.get(b.id)).token, b.token)
      // the interrupted reservation had reached the server before it was interrupted: it was applied
      assert.strictEqual(Option.getOrThrow(yield* store.get(a.id)).token, a.token)
    }))
})
