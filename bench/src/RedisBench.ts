/**
 * Redis: the `RedisStore` (through the `Idempotency` combinator) against Powertools' `makeIdempotent`
 * with its `CachePersistenceLayer` (on `@redis/client`, its peer), and against a bare ioredis client
 * that sends the same commands as the store (the store's two Lua scripts by SHA) and nothing else:
 * the floor of any store outside the downstream. Each contender has a client of its own and a key
 * prefix of its own on the same server; round trips are the commands each client sends. The keys
 * are deleted at the end.
 */
import { IdempotencyConfig } from "@aws-lambda-powertools/idempotency"
import { CachePersistenceLayer } from "@aws-lambda-powertools/idempotency/cache"
import type { CacheClient } from "@aws-lambda-powertools/idempotency/cache/types"
import { RedisClient, RedisScripts, RedisStore } from "@effect-idempotency/redis"
import * as Counting from "@effect-idempotency/test-support/Counting"
import { redisServer, requireRedisServer, unlinkKeys } from "@effect-idempotency/test-support/Redis"
import { createClient } from "@redis/client"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import { Redis } from "ioredis"
import { randomUUID } from "node:crypto"
import * as Baseline from "./Baseline.js"
import { FINGERPRINT, LEASE_MILLIS, TTL_MILLIS, TTL_SECONDS } from "./Baseline.js"
import { BARE, OURS, POWERTOOLS } from "./DynamoDbBench.js"
import { BenchError } from "./Measure.js"
import type { Contender, Plan, SuiteResult } from "./Suite.js"
import * as Suite from "./Suite.js"
import { payloadFor } from "./Workload.js"

/** Where the benchmark runs: a server at a URL, or a `redis-server` started for the run. */
export interface Server {
  readonly kind: "server" | "started"
  readonly url: string
  readonly version: string
}

/** An ioredis client with the store's recommended options that counts the commands it sends. */
const countedIoredis = (url: string) =>
  Effect.gen(function*() {
    const sent: Array<string> = []
    const client = yield* Counting.redis(url, RedisClient.recommendedOptions(), sent)
    yield* Effect.tryPromise({
      try: () => client.ping(),
      catch: (cause) => new BenchError({ message: `no Redis answers at ${url}`, cause })
    }).pipe(Effect.retry(Schedule.spaced("50 millis").pipe(Schedule.upTo("10 seconds"))))
    return { client, roundTrips: () => sent.length }
  })

const ours = (url: string, prefix: string) =>
  Effect.gen(function*() {
    const { client, roundTrips } = yield* countedIoredis(url)
    const store = RedisStore.layerWith({ prefix }).pipe(Layer.provide(RedisClient.layerFromClient(client)))
    return yield* Suite.effectContender(OURS, store, roundTrips)
  })

/**
 * Powertools: `CachePersistenceLayer` on a connected `@redis/client`, whose calls are counted. The
 * key is the event's `key` (hashed), records live 24 hours, and the Lambda context is registered on
 * every call. Payload validation is off: in 2.35.0 the cache layer drops the payload's hash when it
 * records the outcome, so with validation on every replay fails with `IdempotencyValidationError`
 * (aws-powertools/powertools-lambda-typescript#5705, fixed after 2.35.0). It hashes less than the
 * DynamoDB suite's Powertools and than ours (which always fingerprints the request).
 */
const powertools = (url: string, keyPrefix: string) =>
  Effect.gen(function*() {
    const redis = yield* Effect.acquireRelease(
      Effect.tryPromise({
        try: () => createClient({ url }).on("error", () => {}).connect(),
        catch: (cause) => new BenchError({ message: `@redis/client could not connect to ${url}`, cause })
      }),
      (client) => Effect.promise(() => client.close().catch(() => undefined))
    )
    const sent = { commands: 0 }
    const client: CacheClient = {
      get: (name) => {
        sent.commands++
        return redis.get(name)
      },
      set: (name, value, options) => {
        sent.commands++
        return redis.set(name as string, value as string, options as never) as Promise<string | null>
      },
      del: (keys) => {
        sent.commands++
        return redis.del(keys)
      }
    }
    return Baseline.powertools(
      POWERTOOLS,
      {
        persistenceStore: new CachePersistenceLayer({ client }),
        config: new IdempotencyConfig({ eventKeyJmesPath: "key", expiresAfterSeconds: TTL_SECONDS }),
        keyPrefix
      },
      () => sent.commands
    )
  })

/**
 * The floor: the store's reservation script by SHA (one command; it returns the existing record
 * with its outcome), the downstream, then the completion script by SHA. The server's clock, as
 * the store's default; the fingerprint is a constant (no hashing), and only the fields a replay
 * needs are read from the reply (no decoding).
 */
const bare = (url: string, prefix: string) =>
  Effect.gen(function*() {
    const { client, roundTrips } = yield* countedIoredis(url)
    yield* Effect.forEach([RedisScripts.reserve, RedisScripts.complete], (script) =>
      Effect.tryPromise({
        try: () => client.script("LOAD", script.lua),
        catch: (cause) => new BenchError({ message: "the scripts could not be loaded", cause })
      }))
    const lease = String(LEASE_MILLIS)
    const ttl = String(TTL_MILLIS)
    return Baseline.baseline(BARE, roundTrips, (downstream) => ({
      call: async (key) => {
        const record = `${prefix}{charge#${key}}`
        const token = randomUUID()
        const reply = await client.evalsha(
          RedisScripts.reserve.sha,
          1,
          record,
          "",
          token,
          FINGERPRINT,
          lease,
          ttl,
          "1"
        ) as
          | readonly [1, number, number, number]
          | readonly [0, string, string, string, number, number, number, number, string, string]
        if (reply[0] === 0) return Baseline.replayed({ status: reply[1], fingerprint: reply[3], outcome: reply[9] })
        const receipt = await downstream.charge(payloadFor(key))
        await client.evalsha(RedisScripts.complete.sha, 1, record, "", token, "Success", JSON.stringify(receipt), ttl)
        return receipt
      }
    }))
  })

/** The server at `url`, or a `redis-server` started now (stopped with the scope) when there is none. */
export const server = (url: string | undefined): Effect.Effect<Omit<Server, "version">, BenchError, Scope.Scope> =>
  url !== undefined
    ? Effect.succeed({ kind: "server", url })
    : requireRedisServer.pipe(
      Effect.flatMap((binary) => redisServer(binary)),
      Effect.map((started) => ({ kind: "started" as const, url: started.url })),
      Effect.mapError((cause) =>
        new BenchError({ message: "no Redis: give --redis-url (or TEST_REDIS_URL), or install redis-server", cause })
      )
    )

/** The server's version (`redis_version`, or `valkey_version`), and deletes the run's keys at the end. */
const admin = (url: string, pattern: string) =>
  Effect.gen(function*() {
    const client = yield* Effect.acquireRelease(
      Effect.sync(() => {
        const client = new Redis(url, { maxRetriesPerRequest: 1 })
        client.on("error", () => {})
        return client
      }),
      (client) =>
        Effect.tryPromise(() => unlinkKeys(client, pattern)).pipe(
          Effect.ignore,
          Effect.ensuring(Effect.sync(() => client.disconnect()))
        )
    )
    const info = yield* Effect.tryPromise({
      try: () => client.info("server"),
      catch: (cause) => new BenchError({ message: `no Redis answers at ${url}`, cause })
    })
    const version = /(?:valkey|redis)_version:(\S+)/.exec(info)
    return `${info.includes("valkey_version") ? "Valkey" : "Redis"} ${version?.[1] ?? "unknown"}`
  })

/** Runs the suite on the server of `url` (or one started for the run): ours, Powertools, the bare client. */
export const run = (
  url: string | undefined,
  plan: Plan
): Effect.Effect<{ readonly server: Server; readonly result: SuiteResult }, BenchError> =>
  Effect.scoped(Effect.gen(function*() {
    const where = yield* server(url)
    const root = `bench-${plan.runId}-`
    const version = yield* admin(where.url, `${root}*`)
    const contenders: Array<Contender> = [
      yield* ours(where.url, `${root}${OURS}:`),
      yield* powertools(where.url, `${root}${POWERTOOLS}`),
      yield* bare(where.url, `${root}${BARE}:`)
    ]
    const result = yield* Suite.run(plan, contenders)
    return { server: { ...where, version }, result }
  }))
