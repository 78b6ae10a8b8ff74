/**
 * Round trips per path, counted on the client: every command the store's connection sends (the
 * connection's own handshake aside). A first execution costs 2 (reserve, complete), a replay 1, a
 * conflict 1; every store method is one script, one command. A client sends each script whole
 * (`EVAL`) the first time, then by its SHA (`EVALSHA`); a server that lost its scripts costs one
 * command more, once. While scripts await their replies, those sent in one turn of the event loop
 * leave in one write to the socket.
 */
import { IdempotencyRecord, IdempotencyStore } from "@effect-idempotency/core"
import { RedisClient, RedisStore } from "@effect-idempotency/redis"
import { Counting } from "@effect-idempotency/test-support"
import { redisServer, requireRedisServer } from "@effect-idempotency/test-support/Redis"
import * as RoundTrips from "@effect-idempotency/test-support/RoundTrips"
import { assert, layer } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as TestServices from "effect/TestServices"
import type { Redis } from "ioredis"
import { expectReserved, freshId, rawClient, redisUrl, reserveRequest, uniquePrefix } from "./utils/fixtures.js"

/** A client that records the name of every command it sends. */
const countingClient = (url: string) =>
  Effect.gen(function*() {
    const sent: Array<string> = []
    const client = yield* Counting.redis(url, RedisClient.recommendedOptions(), sent)
    return { client, sent }
  })

class Sent extends Context.Tag("test/Sent")<Sent, Array<string>>() {}

class ServerUrl extends Context.Tag("test/ServerUrl")<ServerUrl, string>() {}

const countingStore = (url: string, options?: RedisStore.Options) =>
  Layer.unwrapScoped(
    Effect.map(countingClient(url), ({ client, sent }) =>
      RedisStore.layerWith({ prefix: uniquePrefix("round-trips"), ...options }).pipe(
        Layer.provideMerge(RedisClient.layerFromClient(client)),
        Layer.merge(Layer.succeed(Sent, sent))
      ))
  )

/** Runs an effect and returns its result with the names of the commands it sent. */
const counted = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const sent = yield* Sent
    const before = sent.length
    const result = yield* effect
    return [result, sent.slice(before)] as const
  })

/** Sends each script once, so the counts below see `EVALSHA`. */
const warmUp = Effect.gen(function*() {
  const store = yield* IdempotencyStore.IdempotencyStore
  const id = freshId()
  const token = expectReserved(yield* store.reserve(reserveRequest(id))).token
  yield* store.extend({ id, token, lease: Duration.seconds(30) })
  yield* store.markFailed({ id, token, ttl: Duration.seconds(30) })
  const again = expectReserved(yield* store.reserve(reserveRequest(id))).token
  yield* store.complete({ id, token: again, outcome: IdempotencyRecord.StoredOutcome.Timeout(), ttl: Duration.zero })
  const other = freshId()
  yield* store.release({ id: other, token: expectReserved(yield* store.reserve(reserveRequest(other))).token })
  yield* store.get(id)
})

layer(countingStore(redisUrl), { timeout: "1 minute" })("RedisStore round trips", (it) => {
  it.effect("a client sends a script whole once, then by its SHA", () =>
    Effect.gen(function*() {
      const [, first] = yield* counted(warmUp)
      assert.deepStrictEqual(first.filter((name) => name === "eval").length, 6)
      assert.isTrue(first.every((name) => name === "eval" || name === "evalsha"))
      const [, second] = yield* counted(warmUp)
      assert.isTrue(second.every((name) => name === "evalsha"), second.join(" "))
    }))

  const options = { unit: "commands", setUp: warmUp, command: "evalsha", leaseEnds: "atOnce" } as const
  RoundTrips.cases(it, counted, { replay: 1, conflict: 1 }, options)
  RoundTrips.released(it, counted, options)

  it.effect("the scripts of calls made in one turn on an idle connection leave in two writes: the first at once", () =>
    Effect.gen(function*() {
      yield* warmUp
      const store = yield* IdempotencyStore.IdempotencyStore
      const { client } = yield* RedisClient.RedisClient
      // the socket's system calls: `_write` for one chunk, `_writev` for the chunks of a corked turn
      const socket = (client as Redis).stream as unknown as Record<
        "_write" | "_writev",
        (...args: Array<unknown>) => void
      >
      let writes = 0
      for (const method of ["_write", "_writev"] as const) {
        const original = socket[method]
        socket[method] = (...args) => {
          writes++
          original.apply(socket, args)
        }
      }
      const ids = Array.from({ length: 16 }, () => freshId())
      const [reserved, sent] = yield* counted(
        Effect.forEach(ids, (id) => store.reserve(reserveRequest(id)), { concurrency: "unbounded" })
      ).pipe(Effect.ensuring(Effect.sync(() => {
        delete (socket as Partial<typeof socket>)._write
        delete (socket as Partial<typeof socket>)._writev
      })))
      reserved.forEach(expectReserved)
      assert.strictEqual(sent.length, 16)
      // the first script finds the connection idle and is written at once; the 15 sent while it
      // awaits its reply leave together at the end of the turn
      assert.strictEqual(writes, 2)
    }))

  it.effect("every store method sends exactly 1 command; a purge with the server's clock sends none", () =>
    Effect.gen(function*() {
      yield* warmUp
      const trips = yield* RoundTrips.perMethod<Sent>(counted)
      assert.deepStrictEqual(trips, {
        reserve: 1,
        extend: 1,
        get: 1,
        markFailed: 1,
        takeover: 1,
        complete: 1,
        release: 1,
        purgeExpired: 0
      })
    }))
})

// `SCRIPT FLUSH` on a server of this file's own: the run's server is shared by the other files
layer(
  Layer.unwrapScoped(
    // started on the live clock: `it.layer` builds its layer with `TestClock`
    Effect.map(
      TestServices.provideLive(Effect.flatMap(requireRedisServer, (binary) => redisServer(binary))),
      (server) => Layer.merge(countingStore(server.url), Layer.succeed(ServerUrl, server.url))
    )
  ),
  { timeout: "1 minute" }
)("RedisStore round trips after the server lost its scripts", (it) => {
  it.scoped("a server without the script costs one command more, once (NOSCRIPT, then EVAL)", () =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStore.IdempotencyStore
      yield* warmUp
      const admin = yield* rawClient(yield* ServerUrl)
      yield* Effect.promise(() => admin.script("FLUSH"))
      const id = freshId()
      const [, afterFlush] = yield* counted(store.reserve(reserveRequest(id)))
      assert.deepStrictEqual(afterFlush, ["evalsha", "eval"])
      const [, next] = yield* counted(store.reserve(reserveRequest(id)))
      assert.deepStrictEqual(next, ["evalsha"])
    }))
})
