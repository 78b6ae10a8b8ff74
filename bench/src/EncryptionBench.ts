/**
 * Encryption at rest: what `IdempotencyEncryption` (AES-256-GCM on Node's `crypto` module, sealing every
 * recorded outcome) adds to a call, on every store. Each store is started once; the plain store and
 * the same store wrapped by the encryption layer run side by side, first executions then replays, at
 * concurrency 1, in rounds whose order rotates (plain, encrypted; encrypted, plain; …), for an
 * outcome of 64 bytes and one of 10 KB. On the memory store a third contender also keys the
 * fingerprints (`fingerprintKeys`, HMAC-SHA-256).
 *
 * The stores are reached as the other sections reach them: the server of the URL given, else one
 * the run starts (PGlite, a `mariadbd`, a `redis-server`), DynamoDB Local when Java is found, and
 * dynalite; SQLite and libSQL on temporary files. Every call is checked: a first execution runs the
 * downstream, a replay does not, and after the warm-up the raw records show the outcome sealed
 * (`v1.` envelopes, HMAC fingerprints) where it should be and plain where it should not.
 */
import type { IdempotencyStore as Store } from "@effect-idempotency/core"
import {
  Idempotency,
  IdempotencyEncryption,
  IdempotencyKey,
  IdempotencyRecord,
  IdempotencyStore
} from "@effect-idempotency/core"
import { DynamoDbClient, DynamoDbStore, DynamoDbTable } from "@effect-idempotency/dynamodb"
import { RedisClient, RedisStore } from "@effect-idempotency/redis"
import { SqlIdempotencyStore } from "@effect-idempotency/sql"
import { PgIdempotencyStore } from "@effect-idempotency/sql-pg"
import { dynalite, dynamoDbLocal } from "@effect-idempotency/test-support/DynamoDb"
import { unlinkKeys } from "@effect-idempotency/test-support/Redis"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import { Redis } from "ioredis"
import { randomBytes } from "node:crypto"
import { BenchError, median, pairedRatio, rotation, runBatch } from "./Measure.js"
import * as PostgresBench from "./PostgresBench.js"
import * as RedisBench from "./RedisBench.js"
import * as SqlBench from "./SqlBench.js"
import type { Path } from "./Suite.js"
import { Payload, payloadFor } from "./Workload.js"

/** The contenders: the store as it is, sealed, and sealed with keyed fingerprints (memory store only). */
export type Variant = "plain" | "encrypted" | "encrypted+hmac"

/** The outcomes' sizes: their JSON, as the plain store records it, in bytes. */
export const SIZES: ReadonlyArray<number> = [64, 10_240]

export type StoreKey = "memory" | "sqlite" | "libsql" | "mariadb" | "postgres" | "dynamodbLocal" | "dynalite" | "redis"

export interface Plan {
  /** Distinguishes this run's keys and tables from any earlier run's. */
  readonly runId: string
  readonly rounds: number
  /** Calls per contender, size and path in the warm-up round (not reported). */
  readonly warmupCalls: number
  /** Calls per contender, size and path in each round, by store. */
  readonly calls: Readonly<Record<StoreKey, number>>
}

/** Microseconds per call of each round: wall time, and the process's CPU time. */
export interface Rounds {
  readonly wall: ReadonlyArray<number>
  readonly cpu: ReadonlyArray<number>
}

export interface SizeResult {
  readonly bytes: number
  /** The characters the sealed outcome takes in the store (its envelope). */
  readonly sealedChars: number
  readonly variants: Readonly<Partial<Record<Variant, Readonly<Record<Path, Rounds>>>>>
}

export interface StoreResult {
  /** The store as the report names it, with where it ran. */
  readonly store: string
  readonly calls: number
  readonly sizes: ReadonlyArray<SizeResult>
}

export interface Result {
  readonly rounds: number
  readonly stores: ReadonlyArray<StoreResult>
  /** Stores that could not run, and why. */
  readonly skipped: ReadonlyArray<string>
}

/** One path of a sealed contender against the plain store. */
export interface PathComparison {
  /** Median µs per call over the rounds. */
  readonly plain: number
  readonly sealed: number
  /** Median of the per-round ratios sealed ÷ plain (time per call: above 1 is slower). */
  readonly ratio: number
  /** Median of the per-round differences sealed − plain, in µs per call; wall and CPU time. */
  readonly extra: number
  readonly extraCpu: number
}

export interface Comparison {
  readonly store: string
  readonly bytes: number
  readonly variant: Exclude<Variant, "plain">
  readonly first: PathComparison
  readonly replay: PathComparison
}

const PATHS: ReadonlyArray<Path> = ["first", "replay"]

/** A fresh random 32-byte key of the run. */
const freshKey = (id: string): IdempotencyEncryption.Key => ({
  id,
  key: Redacted.make(new Uint8Array(randomBytes(32)))
})

const SEALING = freshKey("bench-aes")
const SIGNING = freshKey("bench-hmac")

const Outcome = Schema.Struct({ note: Schema.String })

/** An outcome whose JSON, `{"note":"xx…"}`, is `bytes` long. */
const outcomeOf = (bytes: number): typeof Outcome.Type => ({ note: "x".repeat(bytes - "{\"note\":\"\"}".length) })

const medianDifference = (rounds: Rounds, other: Rounds, pick: "wall" | "cpu") =>
  median(rounds[pick].map((value, i) => value - other[pick][i]!))

const emptyRounds = (): Record<Path, { readonly wall: Array<number>; readonly cpu: Array<number> }> => ({
  first: { wall: [], cpu: [] },
  replay: { wall: [], cpu: [] }
})

/** Every sealed contender against the plain store, per store and size. */
export const comparisons = (result: Result): ReadonlyArray<Comparison> =>
  result.stores.flatMap((store) =>
    store.sizes.flatMap((size) => {
      const plain = size.variants.plain
      if (plain === undefined) return []
      return (["encrypted", "encrypted+hmac"] as const).flatMap((variant) => {
        const sealed = size.variants[variant]
        if (sealed === undefined) return []
        const compare = (path: Path): PathComparison => ({
          plain: median(plain[path].wall),
          sealed: median(sealed[path].wall),
          ratio: pairedRatio(sealed[path].wall, plain[path].wall),
          extra: medianDifference(sealed[path], plain[path], "wall"),
          extraCpu: medianDifference(sealed[path], plain[path], "cpu")
        })
        return [{ store: store.store, bytes: size.bytes, variant, first: compare("first"), replay: compare("replay") }]
      })
    })
  )

/**
 * The rounds on one store: the plain store of `layer` and the same store under the encryption
 * wrapper (and, with `hmac`, under the wrapper with keyed fingerprints), one `runPromise` per call.
 */
const measureStore = (
  store: string,
  layer: Layer.Layer<Store.IdempotencyStore, unknown>,
  calls: number,
  plan: Plan,
  hmac: boolean
): Effect.Effect<StoreResult, BenchError, Scope.Scope> =>
  Effect.gen(function*() {
    const fail = (what: string) => (cause: unknown) => new BenchError({ message: `${store}: ${what}`, cause })
    const context = yield* Effect.mapError(Layer.build(layer), fail("the store did not start"))
    const raw = Context.get(context, IdempotencyStore.IdempotencyStore)
    const wrapped = (options: IdempotencyEncryption.Options) =>
      Effect.mapError(IdempotencyEncryption.make(raw, options), fail("the keys were refused"))
    const stores: Partial<Record<Variant, Store.IdempotencyStore["Type"]>> = {
      plain: raw,
      encrypted: yield* wrapped({ keys: [SEALING] }),
      ...(hmac ? { "encrypted+hmac": yield* wrapped({ keys: [SEALING], fingerprintKeys: [SIGNING] }) } : {})
    }
    const variants = Object.keys(stores) as Array<Variant>
    const executions = { count: 0 }
    const operations = new Map(SIZES.map((bytes) => {
      const outcome = outcomeOf(bytes)
      const operation = Idempotency.make({
        name: "charge",
        payload: Payload,
        success: Outcome,
        execute: () =>
          Effect.sync(() => {
            executions.count++
            return outcome
          })
      })
      return [bytes, operation] as const
    }))
    const keyOf = (variant: Variant, bytes: number, round: number | "warmup", i: number) =>
      `${plan.runId}-${variant}-${bytes}-${round}-${i}`
    const call = (variant: Variant, bytes: number, key: string) =>
      Effect.runPromise(
        operations.get(bytes)!.run({ key, payload: payloadFor(key) }).pipe(
          Effect.provideService(IdempotencyStore.IdempotencyStore, stores[variant]!)
        )
      )

    /** One batch, checked: a first execution runs the downstream, a replay never does. µs per call. */
    const batch = (variant: Variant, bytes: number, path: Path, round: number | "warmup", n: number) =>
      Effect.gen(function*() {
        const before = executions.count
        const measured = yield* Effect.mapError(
          runBatch(n, 1, (i) => call(variant, bytes, keyOf(variant, bytes, round, i))),
          (error) =>
            new BenchError({ message: `${store}, ${variant}, ${bytes} B, ${path}: ${error.message}`, cause: error })
        )
        const executed = executions.count - before
        const expected = path === "first" ? n : 0
        if (executed !== expected) {
          return yield* new BenchError({
            message:
              `${store}, ${variant}: ${n} ${path} calls executed the downstream ${executed} times, not ${expected}`
          })
        }
        return { wall: (measured.millis * 1000) / n, cpu: measured.cpuMicros / n }
      })

    const all = variants.flatMap((variant) => SIZES.map((bytes) => ({ variant, bytes })))
    for (const path of PATHS) {
      for (const { bytes, variant } of all) yield* batch(variant, bytes, path, "warmup", plan.warmupCalls)
    }

    // the raw records of the warm-up: sealed where they should be, plain where they should not
    const sealedChars = new Map<number, number>()
    for (const { bytes, variant } of all) {
      const id = IdempotencyRecord.makeRecordId({
        operation: "charge",
        key: IdempotencyKey.unsafeMake(keyOf(variant, bytes, "warmup", 0))
      })
      const record = Option.getOrUndefined(yield* Effect.mapError(raw.get(id), fail("a record could not be read")))
      const body = record?.outcome === undefined ? undefined : IdempotencyRecord.outcomeToColumns(record.outcome).body
      const problem = body === undefined
        ? "no outcome recorded"
        : variant === "plain"
        ? body.length === bytes ? undefined : `a plain outcome of ${body.length} characters, not ${bytes}`
        : !body.startsWith(`${IdempotencyEncryption.VERSION}.${SEALING.id}.`)
        ? "the outcome is not sealed"
        : (variant === "encrypted+hmac") !==
            record!.fingerprint.startsWith(`${IdempotencyEncryption.FINGERPRINT_ALGORITHM}:`)
        ? `the fingerprint is ${variant === "encrypted+hmac" ? "not keyed" : "keyed"}`
        : undefined
      if (problem !== undefined) {
        return yield* new BenchError({ message: `${store}, ${variant}, ${bytes} B: ${problem}` })
      }
      if (variant === "encrypted") sealedChars.set(bytes, body!.length)
    }

    const rounds = new Map(all.map(({ bytes, variant }) => [`${variant} ${bytes}`, emptyRounds()]))
    for (let round = 0; round < plan.rounds; round++) {
      for (const bytes of SIZES) {
        for (const path of PATHS) {
          for (const variant of rotation(variants, round)) {
            const { cpu, wall } = yield* batch(variant, bytes, path, round, calls)
            const into = rounds.get(`${variant} ${bytes}`)![path]!
            into.wall.push(wall)
            into.cpu.push(cpu)
          }
        }
      }
    }
    return {
      store,
      calls,
      sizes: SIZES.map((bytes) => ({
        bytes,
        sealedChars: sealedChars.get(bytes)!,
        variants: Object.fromEntries(
          variants.map((variant) => [variant, rounds.get(`${variant} ${bytes}`)!])
        )
      }))
    }
  })

const serverError = (what: string) => (cause: { readonly message: string }) =>
  new BenchError({ message: `${what} did not start: ${cause.message}`, cause })

/**
 * Runs the rounds on every store, one after the other, each started for its turn and stopped after
 * it; DynamoDB Local only when `java` is given.
 */
export const run = (
  options: {
    readonly pgUrl: string | undefined
    readonly redisUrl: string | undefined
    readonly mysqlUrl: string | undefined
    readonly java: string | undefined
  },
  plan: Plan,
  section: (name: string) => Effect.Effect<void>
): Effect.Effect<Result, BenchError> =>
  Effect.gen(function*() {
    const stores: Array<StoreResult> = []
    const skipped: Array<string> = []
    const table = `bench_encryption_${plan.runId.replaceAll("-", "_")}`
    const on = (
      key: StoreKey,
      title: string,
      layer: Effect.Effect<
        { readonly store: string; readonly layer: Layer.Layer<Store.IdempotencyStore, unknown> },
        BenchError,
        Scope.Scope
      >
    ) =>
      Effect.gen(function*() {
        yield* section(`encryption at rest: ${title}`)
        const made = yield* layer
        stores.push(yield* measureStore(made.store, made.layer, plan.calls[key], plan, key === "memory"))
      }).pipe(Effect.scoped)
    // the bench's SQL clients (SqlBench.client): temporary files, the run's own MariaDB database
    const sql = (engine: SqlBench.Engine, title: string) =>
      Effect.map(SqlBench.client(engine, options.mysqlUrl), ({ sql }) => ({
        store: title,
        layer: SqlIdempotencyStore.layerWith({ table, migrate: true }).pipe(
          Layer.provide(Layer.succeed(SqlClient.SqlClient, sql))
        )
      }))

    yield* on(
      "memory",
      "memory",
      Effect.succeed({ store: "memory", layer: IdempotencyStore.layerMemoryWith({ warn: false }) })
    )
    const sqliteTitle = "SQLite (better-sqlite3, a temporary file)"
    yield* on("sqlite", sqliteTitle, sql("sqlite", sqliteTitle))
    const libsqlTitle = "libSQL (a temporary file)"
    yield* on("libsql", libsqlTitle, sql("libsql", libsqlTitle))
    const mariadbTitle = `MariaDB (${options.mysqlUrl === undefined ? "mariadbd started by the run" : "server"})`
    yield* on("mariadb", mariadbTitle, sql("mariadb", mariadbTitle))
    yield* on(
      "postgres",
      `PostgreSQL (${options.pgUrl === undefined ? "PGlite" : "server"})`,
      Effect.gen(function*() {
        const database = yield* PostgresBench.database(options.pgUrl)
        // a schema of the run's own, dropped with the table the store's migration makes in it
        const { pool, schema } = yield* PostgresBench.countedPool(database.url, 4, { statements: 0 })
        yield* schema(table)
        return {
          store: `PostgreSQL (${database.kind === "pglite" ? "PGlite" : "server"})`,
          layer: PgIdempotencyStore.layerWith({ schema: table, table: "records", migrate: true }).pipe(
            Layer.provide(PgClient.layerFromPool({ acquire: Effect.succeed(pool) }))
          )
        }
      })
    )
    // the table lives in the endpoint the run starts, and goes with it
    const dynamoDb = (name: string, endpoint: string) => {
      const tableName = `bench-encryption-${plan.runId}`
      return {
        store: name,
        layer: Layer.effect(
          IdempotencyStore.IdempotencyStore,
          Effect.zipRight(
            // dynalite has no TTL API: the table's warning about it is not this section's business
            Logger.withMinimumLogLevel(DynamoDbTable.create({ tableName }), LogLevel.Error),
            DynamoDbStore.make({ tableName })
          )
        ).pipe(Layer.provide(DynamoDbClient.layer({
          endpoint,
          region: "us-east-1",
          credentials: { accessKeyId: "local", secretAccessKey: "local" }
        })))
      }
    }
    if (options.java === undefined) {
      skipped.push("DynamoDB Local (no java found)")
    } else {
      const java = options.java
      yield* on(
        "dynamodbLocal",
        "DynamoDB Local",
        Effect.map(Effect.mapError(dynamoDbLocal(java), serverError("DynamoDB Local")), (url) =>
          dynamoDb("DynamoDB Local", url))
      )
    }
    yield* on(
      "dynalite",
      "dynalite",
      Effect.map(Effect.mapError(dynalite, serverError("dynalite")), (url) =>
        dynamoDb("dynalite", url))
    )
    const redisTitle = `Redis (${options.redisUrl === undefined ? "redis-server started by the run" : "server"})`
    yield* on(
      "redis",
      redisTitle,
      Effect.gen(function*() {
        const { url } = yield* RedisBench.server(options.redisUrl)
        const prefix = `bench-${plan.runId}-encryption:`
        const client = yield* RedisClient.make({ url })
        // before the client quits: the run's keys are deleted (a URL makes a client, not a cluster)
        yield* Effect.addFinalizer(() =>
          client.client instanceof Redis
            ? Effect.ignore(Effect.tryPromise(() => unlinkKeys(client.client as Redis, `${prefix}*`)))
            : Effect.void
        )
        return {
          store: redisTitle,
          layer: RedisStore.layerWith({ prefix }).pipe(Layer.provide(Layer.succeed(RedisClient.RedisClient, client)))
        }
      })
    )
    return { rounds: plan.rounds, stores, skipped }
  })
