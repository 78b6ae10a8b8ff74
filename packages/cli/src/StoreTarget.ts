/**
 * The store a command acts on, named by a URL or the environment (README.md#the-store), and the
 * layer that reaches it.
 *
 * @example
 * ```ts
 * import { StoreTarget } from "@effect-idempotency/cli"
 * import { Effect, Option } from "effect"
 *
 * const target = StoreTarget.resolve({
 *   store: Option.none(),
 *   table: Option.none(),
 *   schema: Option.none(),
 *   prefix: Option.none(),
 *   keyAttribute: Option.none(),
 *   ttlAttribute: Option.none()
 * })
 * // with DATABASE_URL set: a PostgreSQL target on the table idempotency_records
 * Effect.runPromise(Effect.either(target)).then(console.log)
 * ```
 *
 * @since 0.1.0
 */
import type { IdempotencyAdmin, IdempotencyError, IdempotencyStore } from "@effect-idempotency/core"
import * as Config from "effect/Config"
import type * as ConfigError from "effect/ConfigError"
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Predicate from "effect/Predicate"
import * as Redacted from "effect/Redacted"
import { InvalidStore } from "./CliError.js"

/**
 * A store, resolved: which kind, where, and the names its layer uses.
 *
 * A store, resolved; a name left `undefined` is the store's default.
 *
 * @since 0.1.0
 * @category models
 */
export type StoreTarget = Data.TaggedEnum<{
  Postgres: { readonly url: Redacted.Redacted; readonly table: string | undefined; readonly schema: string | undefined }
  /** A `mariadb://` URL's scheme is replaced with `mysql://`. */
  MariaDb: { readonly url: Redacted.Redacted; readonly table: string | undefined }
  Sqlite: { readonly filename: string; readonly table: string | undefined }
  Libsql: {
    readonly url: Redacted.Redacted
    readonly authToken: Redacted.Redacted | undefined
    readonly table: string | undefined
  }
  /** An admin endpoint in front of a store: the admin service, not the store. */
  Endpoint: { readonly url: string; readonly token: Redacted.Redacted }
  Redis: { readonly url: Redacted.Redacted; readonly prefix: string | undefined }
  DynamoDb: {
    readonly tableName: string | undefined
    readonly region: string
    readonly endpoint: string | undefined
    readonly keyAttribute: string | undefined
    readonly ttlAttribute: string | undefined
  }
}>

const cases = Data.taggedEnum<StoreTarget>()

/**
 * The targets' constructors, `$is` and `$match`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const StoreTarget: typeof cases & {
  /** @deprecated `Mysql` is `MariaDb` (the store runs on MariaDB only); removed at 1.0. */
  readonly Mysql: typeof cases.MariaDb
} = Object.assign(Object.create(cases) as typeof cases, { Mysql: cases.MariaDb })

/**
 * What the command line says about the store.
 *
 * @since 0.1.0
 * @category models
 */
export interface StoreOptions {
  readonly store: Option.Option<Redacted.Redacted>
  readonly table: Option.Option<string>
  readonly schema: Option.Option<string>
  readonly prefix: Option.Option<string>
  readonly keyAttribute: Option.Option<string>
  readonly ttlAttribute: Option.Option<string>
  readonly endpoint?: Option.Option<string> | undefined
  readonly token?: Option.Option<Redacted.Redacted> | undefined
}

const optionalString = (name: string) => Config.option(Config.nonEmptyString(name))

const optionalRedacted = (name: string) =>
  Config.option(Config.redacted(name)).pipe(
    Config.map(Option.filter((value) => Redacted.value(value) !== ""))
  )

const first = <A>(...options: ReadonlyArray<Option.Option<A>>): Option.Option<A> =>
  options.find(Option.isSome) ?? Option.none()

const table = (options: StoreOptions) =>
  Effect.map(optionalString("IDEMPOTENCY_TABLE"), (fromEnv) => Option.getOrUndefined(first(options.table, fromEnv)))

const fromUrl = (
  url: Redacted.Redacted,
  options: StoreOptions
): Effect.Effect<StoreTarget, InvalidStore | ConfigError.ConfigError> =>
  Effect.gen(function*() {
    const raw = Redacted.value(url).trim()
    const parsed = yield* Effect.try({
      try: () => new URL(raw),
      catch: () => new InvalidStore({ reason: "--store is not a URL" })
    })
    switch (parsed.protocol) {
      case "postgres:":
      case "postgresql:":
        return StoreTarget.Postgres({
          url,
          table: yield* table(options),
          schema: Option.getOrUndefined(options.schema)
        })
      case "mysql:":
        return StoreTarget.MariaDb({ url, table: yield* table(options) })
      case "mariadb:":
        return StoreTarget.MariaDb({
          url: Redacted.make(`mysql:${raw.slice(parsed.protocol.length)}`),
          table: yield* table(options)
        })
      case "sqlite:": {
        const rest = raw.slice(parsed.protocol.length)
        const filename = rest.startsWith("//") ? (rest.startsWith("///") ? rest.slice(2) : "") : rest
        if (filename === "") {
          return yield* new InvalidStore({
            reason: "a SQLite store is sqlite:<path> or sqlite:///<absolute path> (a URL with no host)"
          })
        }
        return StoreTarget.Sqlite({ filename, table: yield* table(options) })
      }
      case "file:":
      case "libsql:":
        return StoreTarget.Libsql({
          url,
          authToken: Option.getOrUndefined(yield* optionalRedacted("LIBSQL_AUTH_TOKEN")),
          table: yield* table(options)
        })
      case "redis:":
      case "rediss:":
        return StoreTarget.Redis({
          url,
          prefix: Option.getOrUndefined(first(options.prefix, yield* optionalString("IDEMPOTENCY_PREFIX")))
        })
      case "dynamodb:": {
        const named = (parsed.hostname || parsed.pathname.replace(/^\/+/, "")).trim()
        return yield* dynamoDb(options, {
          tableName: named === "" ? Option.none() : Option.some(decodeURIComponent(named)),
          region: Option.fromNullable(parsed.searchParams.get("region") || undefined),
          endpoint: Option.fromNullable(parsed.searchParams.get("endpoint") || undefined)
        })
      }
      default:
        return yield* new InvalidStore({
          reason: "the URL of --store must start with postgres://, postgresql://, mysql://, mariadb://, sqlite:, " +
            "file:, libsql://, redis://, rediss:// or dynamodb://"
        })
    }
  })

const dynamoDb = (
  options: StoreOptions,
  fromUrl: {
    readonly tableName: Option.Option<string>
    readonly region: Option.Option<string>
    readonly endpoint: Option.Option<string>
  }
): Effect.Effect<StoreTarget, InvalidStore | ConfigError.ConfigError> =>
  Effect.gen(function*() {
    const region = first(fromUrl.region, yield* optionalString("AWS_REGION"))
    if (Option.isNone(region)) {
      return yield* new InvalidStore({
        reason: "a DynamoDB store needs a region: ?region= in the store URL, or AWS_REGION"
      })
    }
    return StoreTarget.DynamoDb({
      tableName: Option.getOrUndefined(
        first(options.table, fromUrl.tableName, yield* optionalString("IDEMPOTENCY_TABLE"))
      ),
      region: region.value,
      endpoint: Option.getOrUndefined(first(fromUrl.endpoint, yield* optionalString("DYNAMODB_ENDPOINT"))),
      keyAttribute: Option.getOrUndefined(
        first(options.keyAttribute, yield* optionalString("IDEMPOTENCY_KEY_ATTRIBUTE"))
      ),
      ttlAttribute: Option.getOrUndefined(
        first(options.ttlAttribute, yield* optionalString("IDEMPOTENCY_TTL_ATTRIBUTE"))
      )
    })
  })

const endpointTarget = (
  url: string,
  options: StoreOptions
): Effect.Effect<StoreTarget, InvalidStore | ConfigError.ConfigError> =>
  Effect.gen(function*() {
    const parsed = yield* Effect.try({
      try: () => new URL(url.trim()),
      catch: () => new InvalidStore({ reason: "--endpoint is not a URL" })
    })
    if (parsed.protocol !== "https:" && parsed.protocol !== "http:") {
      return yield* new InvalidStore({ reason: "--endpoint must be an https:// (or http://) URL" })
    }
    if (parsed.username !== "" || parsed.password !== "") {
      return yield* new InvalidStore({
        reason: "--endpoint takes its token from --token or IDEMPOTENCY_ADMIN_TOKEN, not the URL"
      })
    }
    const token = first(options.token ?? Option.none(), yield* optionalRedacted("IDEMPOTENCY_ADMIN_TOKEN"))
    if (Option.isNone(token)) {
      return yield* new InvalidStore({
        reason: "an --endpoint needs its token: set IDEMPOTENCY_ADMIN_TOKEN, or pass --token"
      })
    }
    return StoreTarget.Endpoint({ url: parsed.toString().replace(/\/+$/, ""), token: token.value })
  })

/**
 * The store the options name: `--store`, else the environment, read through `Config`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const resolve = (options: StoreOptions): Effect.Effect<StoreTarget, InvalidStore | ConfigError.ConfigError> =>
  Effect.gen(function*() {
    const endpointOption = options.endpoint ?? Option.none()
    if (Option.isSome(options.store) && Option.isSome(endpointOption)) {
      return yield* new InvalidStore({ reason: "--store and --endpoint name two stores: give one" })
    }
    if (Option.isSome(options.store)) return yield* fromUrl(options.store.value, options)
    const endpoint = first(endpointOption, yield* optionalString("IDEMPOTENCY_ADMIN_ENDPOINT"))
    if (Option.isSome(endpoint)) return yield* endpointTarget(endpoint.value, options)
    const database = yield* optionalRedacted("DATABASE_URL")
    const redis = yield* optionalRedacted("REDIS_URL")
    if (Option.isSome(database) && Option.isSome(redis)) {
      return yield* new InvalidStore({ reason: "both DATABASE_URL and REDIS_URL are set: name the store with --store" })
    }
    const url = first(database, redis)
    if (Option.isSome(url)) return yield* fromUrl(url.value, options)
    if (
      Option.isSome(yield* optionalString("AWS_REGION")) || Option.isSome(yield* optionalString("DYNAMODB_ENDPOINT"))
    ) {
      return yield* dynamoDb(options, { tableName: Option.none(), region: Option.none(), endpoint: Option.none() })
    }
    return yield* new InvalidStore({
      reason: "no store named: pass --store <url>, or set DATABASE_URL, REDIS_URL, or AWS_REGION for DynamoDB"
    })
  })

/**
 * What `migrate` did.
 *
 * @since 0.1.0
 * @category models
 */
export interface MigrateResult {
  readonly store: StoreTarget["_tag"]
  /** `false` for a store without schema (Redis). */
  readonly applied: boolean
  /** `undefined` where `IF NOT EXISTS` statements do not tell (the SQL stores). */
  readonly created: boolean | undefined
  readonly detail: string
}

/**
 * Creates what the store needs before its first use (README.md#commands, `migrate`).
 *
 * @since 0.1.0
 * @category tags
 */
export class StoreSchema extends Context.Tag("@effect-idempotency/cli/StoreSchema")<
  StoreSchema,
  {
    readonly migrate: Effect.Effect<MigrateResult, IdempotencyError.StoreFailure | InvalidStore>
    readonly adminIndex?: Effect.Effect<MigrateResult, IdempotencyError.StoreFailure> | undefined
  }
>() {}

/**
 * The admin service, the store and its schema for a target, loading only its store's package and
 * driver (README.md#the-store).
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  target: StoreTarget
): Layer.Layer<
  IdempotencyAdmin.IdempotencyAdmin | IdempotencyStore.IdempotencyStore | StoreSchema,
  InvalidStore | IdempotencyError.StoreUnavailable | IdempotencyAdmin.AdminUnsupported
> =>
  Layer.unwrapEffect(
    StoreTarget.$match(target, {
      Postgres: (target) =>
        Effect.map(Effect.promise(() => import("./internal/stores/postgres.js")), (m) => m.layer(target)),
      MariaDb: (target) =>
        Effect.map(Effect.promise(() => import("./internal/stores/mariadb.js")), (m) => m.layer(target)),
      Sqlite: (target) =>
        Effect.tryPromise({
          try: () => import("./internal/stores/sqlite.js"),
          catch: (cause) => cause
        }).pipe(
          Effect.catchAll((cause) =>
            isMissing(cause, ["@effect/sql-sqlite-node", "better-sqlite3"])
              ? Effect.fail(
                new InvalidStore({
                  reason: "a sqlite: store needs @effect/sql-sqlite-node (and its better-sqlite3) installed beside " +
                    "the CLI: npm i @effect/sql-sqlite-node@^0.53.0; or name the file as file:<path>, which libSQL opens"
                })
              )
              : Effect.die(cause)
          ),
          Effect.map((m) => m.layer(target))
        ),
      Libsql: (target) =>
        Effect.map(Effect.promise(() => import("./internal/stores/libsql.js")), (m) => m.layer(target)),
      Redis: (target) => Effect.map(Effect.promise(() => import("./internal/stores/redis.js")), (m) => m.layer(target)),
      DynamoDb: (target) =>
        Effect.map(Effect.promise(() => import("./internal/stores/dynamodb.js")), (m) => m.layer(target)),
      Endpoint: () =>
        Effect.succeed(Layer.fail(
          new InvalidStore({ reason: "an admin endpoint serves the admin service, not the store: name a store" })
        ))
    })
  )

/**
 * `layer`'s, or for an admin endpoint the admin service through it: what the commands use.
 *
 * @since 0.1.0
 * @category layers
 */
export const adminLayer = (
  target: StoreTarget
): Layer.Layer<
  IdempotencyAdmin.IdempotencyAdmin | StoreSchema,
  InvalidStore | IdempotencyError.StoreUnavailable | IdempotencyAdmin.AdminUnsupported
> =>
  target._tag === "Endpoint"
    ? Layer.unwrapEffect(
      Effect.map(Effect.promise(() => import("./internal/stores/endpoint.js")), (m) => m.layer(target))
    )
    : layer(target)

/** Whether an `import()` failed because one of `packages` is not installed. */
const isMissing = (cause: unknown, packages: ReadonlyArray<string>): boolean => {
  if (
    !Predicate.hasProperty(cause, "code") || !["ERR_MODULE_NOT_FOUND", "MODULE_NOT_FOUND"].includes(String(cause.code))
  ) {
    return false
  }
  const message = Predicate.hasProperty(cause, "message") ? String(cause.message) : ""
  return packages.some((name) => message.includes(`'${name}'`))
}
