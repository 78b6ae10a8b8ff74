/**
 * Round trips per path, counted on the client: every command the store's connection sends (the
 * connection's own handshake aside). A first execution costs 2 (reserve, complete), a replay 1, a
 * conflict 1; every store method is one script, one command. A client sends each script whole
 * (`EVAL`) the first time, then by its SHA (`EVALSHA`); a server that lost its scripts costs one
 * command more, once. While scripts await their replies, those sent in one turn of the event loop
 * leave in one write to the socket.
 */
import { Idempotency, IdempotencyKey, IdempotencyRecord, IdempotencyStore } from "@effect-idempotency/core"
import { RedisClient, RedisStore } from "@effect-idempotency/redis"
import { Counting } from "@effect-idempotency/test-support"
import { redisServer, requireRedisServer } from "@effect-idempotency/test-support/Redis"
import { assert, layer } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Ref from "effect/Ref"
import * as Schema from "effect/Schema"
import * as TestServices from "effect/TestServices"
import type { Redis } from "ioredis"
import { randomUUID } from "node:crypto"
import {
  expectReserved,
  freshId,
  Payload,
  payload,
  rawClient,
  redisUrl,
  reserveRequest,
  uniquePrefix
} from "./utils/fixtures.js"

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

const trips = <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.map(counted(effect), ([, sent]) => sent.length)

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

  it.effect("a first execution sends 2 commands, a replay 1, a changed request 1, a conflict 1", () =>
    Effect.gen(function*() {
      yield* warmUp
      const executions = yield* Ref.make(0)
      const started = yield* Deferred.make<void>()
      const proceed = yield* Deferred.make<void>()
      const operation = Idempotency.make({
        name: `round-trips-${randomUUID()}`,
        payload: Payload,
        success: Schema.Number,
        execute: () => Ref.updateAndGet(executions, (n) => n + 1)
      })
      const slow = Idempotency.make({
        name: `round-trips-slow-${randomUUID()}`,
        payload: Payload,
        success: Schema.Number,
        execute: () => Deferred.succeed(started, void 0).pipe(Effect.zipRight(Deferred.await(proceed)), Effect.as(7))
      })
      const key = randomUUID()

      const [first, firstSent] = yield* counted(operation.runDetailed({ key, payload }))
      assert.isFalse(first.replayed)
      assert.deepStrictEqual(firstSent, ["evalsha", "evalsha"])

      const [replay, replaySent] = yield* counted(operation.runDetailed({ key, payload }))
      assert.isTrue(replay.replayed)
      assert.deepStrictEqual(replaySent, ["evalsha"])

      const [reused, reusedSent] = yield* counted(
        Effect.either(operation.run({ key, payload: { ...payload, amount: 11 } }))
      )
      assert.isTrue(Either.isLeft(reused) && reused.left._tag === "KeyReused")
      assert.deepStrictEqual(reusedSent, ["evalsha"])

      const slowKey = randomUUID()
      const holder = yield* Effect.fork(slow.run({ key: slowKey, payload }))
      yield* Deferred.await(started)
      const [conflict, conflictSent] = yield* counted(Effect.either(slow.run({ key: slowKey, payload })))
      assert.isTrue(Either.isLeft(conflict) && conflict.left._tag === "IdempotencyConflict")
      assert.deepStrictEqual(conflictSent, ["evalsha"])
      yield* Deferred.succeed(proceed, void 0)
      assert.strictEqual(yield* Fiber.join(holder), 7)
      assert.strictEqual(yield* Ref.get(executions), 1)
    }))

  it.effect("a takeover of an ended lease and of a FAILED record sends 2 commands (reserve, complete)", () =>
    Effect.gen(function*() {
      yield* warmUp
      const store = yield* IdempotencyStore.IdempotencyStore
      const operation = Idempotency.make({
        name: `round-trips-takeover-${randomUUID()}`,
        payload: Payload,
        success: Schema.Number,
        execute: () => Effect.succeed(1)
      })
      const fingerprint = yield* Idempotency.fingerprint(Payload, payload)
      for (const crash of ["lease", "failed"] as const) {
        const key = randomUUID()
        const id = IdempotencyRecord.makeRecordId({ operation: operation.name, key: IdempotencyKey.unsafeMake(key) })
        // a crashed attempt: a lease that ended at once (the server's clock), or a FAILED mark
        const crashed = expectReserved(
          yield* store.reserve(
            reserveRequest(id, crash === "lease" ? { fingerprint, lease: Duration.zero } : { fingerprint })
          )
        )
        if (crash === "failed") yield* store.markFailed({ id, token: crashed.token, ttl: Duration.hours(1) })
        const [result, sent] = yield* counted(operation.runDetailed({ key, payload }))
        assert.strictEqual(result.attempt, 2)
        assert.deepStrictEqual(sent, ["evalsha", "evalsha"])
      }
    }))

  it.effect("a failure released for a retry sends 2 commands (reserve, release)", () =>
    Effect.gen(function*() {
      yield* warmUp
      const operation = Idempotency.make({
        name: `round-trips-release-${randomUUID()}`,
        payload: Payload,
        success: Schema.Number,
        execute: () => Effect.fail("transient" as const)
      })
      const [result, sent] = yield* counted(Effect.either(operation.run({ key: randomUUID(), payload })))
      assert.deepStrictEqual(result, Either.left("transient" as const))
      assert.deepStrictEqual(sent, ["evalsha", "evalsha"])
    }))

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
      const store = yield* IdempotencyStore.IdempotencyStore
      const id = freshId()
      const [reserved, reserveTrips] = yield* counted(store.reserve(reserveRequest(id)))
      const token = expectReserved(reserved).token
      const outcome = IdempotencyRecord.StoredOutcome.Success({ value: "1" })
      const counts = [
        reserveTrips.length,
        yield* trips(store.extend({ id, token, lease: Duration.seconds(30) })),
        yield* trips(store.get(id)),
        yield* trips(store.markFailed({ id, token, ttl: Duration.hours(1) })),
        yield* trips(store.reserve(reserveRequest(id))),
        yield* trips(Effect.either(store.complete({ id, token, outcome, ttl: Duration.hours(1) }))),
        yield* trips(Effect.either(store.release({ id, token }))),
        yield* trips(store.purgeExpired({ limit: 10 }))
      ]
      assert.deepStrictEqual(counts, [1, 1, 1, 1, 1, 1, 1, 0])
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
