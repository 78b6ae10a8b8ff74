/**
 * The store a command acts on: named by a URL (`--store`), or by the environment variables the
 * store layers are configured with in this repository's examples, and the layer that reaches it.
 *
 * | URL | store |
 * | --- | --- |
 * | `postgres://…`, `postgresql://…` | PostgreSQL (`@effect-idempotency/sql-pg`), table `--table` (`IDEMPOTENCY_TABLE`, default `idempotency_records`) in `--schema` |
 * | `mysql://…`, `mariadb://…` | MariaDB 10.5+ (`@effect-idempotency/sql` on `@effect/sql-mysql2`), table `--table` (`IDEMPOTENCY_TABLE`, default `idempotency_records`) |
 * | `sqlite:<path>`, `sqlite:///<absolute path>` | SQLite (`@effect-idempotency/sql` on `@effect/sql-sqlite-node`, installed beside the CLI), table as above |
 * | `file:<path>`, `libsql://…` | libSQL (`@effect-idempotency/sql` on `@effect/sql-libsql`), a local file or a server; the auth token from `LIBSQL_AUTH_TOKEN`; table as above |
 * | `redis://…`, `rediss://…` | Redis / Valkey (`@effect-idempotency/redis`), keys under `--prefix` (`IDEMPOTENCY_PREFIX`, default `idempotency:`) |
 * | `dynamodb://<table>?region=…&endpoint=…` | DynamoDB (`@effect-idempotency/dynamodb`); the table defaults to `IDEMPOTENCY_TABLE`, then `idempotency`; the region to `AWS_REGION`, the endpoint to `DYNAMODB_ENDPOINT` |
 * | `--endpoint https://…` | an admin endpoint (`IdempotencyAdminApi` of `@effect-idempotency/platform`) in front of a store only its platform reaches (D1, Durable Objects, a private network); the token from `--token`, else `IDEMPOTENCY_ADMIN_TOKEN` |
 *
 * Without `--store`: `IDEMPOTENCY_ADMIN_ENDPOINT` names an admin endpoint; else `DATABASE_URL` names
 * a SQL store (by its scheme), `REDIS_URL` a Redis store (not both), and with neither, `AWS_REGION` or `DYNAMODB_ENDPOINT` a DynamoDB store. DynamoDB credentials come
 * from the AWS SDK's default chain (`AWS_ACCESS_KEY_ID`, `AWS_PROFILE`, a role).
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
 * @since 0.1.0
 * @category models
 */
export type StoreTarget = Data.TaggedEnum<{
  /** `table` and `schema` `undefined`: the store's defaults (`idempotency_records`, the `search_path`). */
  Postgres: { readonly url: Redacted.Redacted; readonly table: string | undefined; readonly schema: string | undefined }
  /** `url` is `mysql://` (a `mariadb://` URL's scheme is replaced); `table` `undefined`: the store's default, `idempotency_records`. */
  Mysql: { readonly url: Redacted.Redacted; readonly table: string | undefined }
  /** A database file, opened with better-sqlite3; `table` as `Mysql`'s. */
  Sqlite: { readonly filename: string; readonly table: string | undefined }
  /** A `file:` or `libsql://` URL as given; `authToken` from `LIBSQL_AUTH_TOKEN`; `table` as `Mysql`'s. */
  Libsql: {
    readonly url: Redacted.Redacted
    readonly authToken: Redacted.Redacted | undefined
    readonly table: string | undefined
  }
  /**
   * An admin endpoint (`IdempotencyAdminApi` of `@effect-idempotency/platform`) in front of a store
   * only its platform reaches: the admin service, not the store.
   */
  Endpoint: { readonly url: string; readonly token: Redacted.Redacted }
  /** `prefix` `undefined`: the store's default, `idempotency:`. */
  Redis: { readonly url: Redacted.Redacted; readonly prefix: string | undefined }
  /** `tableName` `undefined`: the store's default, `idempotency`. */
  DynamoDb: {
    readonly tableName: string | undefined
    readonly region: string
    readonly endpoint: string | undefined
    readonly keyAttribute: string | undefined
    readonly ttlAttribute: string | undefined
  }
}>

/**
 * The constructors and matchers of `StoreTarget`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const StoreTarget = Data.taggedEnum<StoreTarget>()

/**
 * What the command line says about the store; every field is optional.
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
  /** An admin endpoint instead of a store (`--endpoint`); default `IDEMPOTENCY_ADMIN_ENDPOINT`. */
  readonly endpoint?: Option.Option<string> | undefined
  /** The endpoint's token (`--token`); default `IDEMPOTENCY_ADMIN_TOKEN`. */
  readonly token?: Option.Option<Redacted.Redacted> | undefined
}

const optionalString = (name: string) => Config.option(Config.nonEmptyString(name))

const optionalRedacted = (name: string) =>
  Config.option(Config.redacted(name)).pipe(
    Config.map(Option.filter((value) => Redacted.value(value) !== ""))
  )

const first = <A>(...options: ReadonlyArray<Option.Option<A>>): Option.Option<A> =>
  options.find(Option.isSome) ?? Option.none()

/** The table of a SQL store: `--table`, else `IDEMPOTENCY_TABLE`, else (`undefined`) the store's default. */
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
        return StoreTarget.Mysql({ url, table: yield* table(options) })
      case "mariadb:":
        return StoreTarget.Mysql({
          url: Redacted.make(`mysql:${raw.slice(parsed.protocol.length)}`),
          table: yield* table(options)
        })
      case "sqlite:": {
        // the path as written after the scheme: `sqlite:./records.db`, or `sqlite:///srv/records.db`
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
 * The store the options name: `--store` when given, else the environment (see the module's
 * documentation), read through `Config`.
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
  /** Whether the store has a schema the CLI created or checked (`false` for Redis, which has none). */
  readonly applied: boolean
  /**
   * Whether something was created now (`false` when it existed already, or for a store without schema;
   * `undefined` where the statements are `IF NOT EXISTS` and do not tell: PostgreSQL, MariaDB, SQLite, libSQL).
   */
  readonly created: boolean | undefined
  readonly detail: string
}

/**
 * Creates what the store needs before its first use: the table and its function in PostgreSQL, the
 * table and its index on `expires_at` in MariaDB, SQLite or libSQL, the table (with native TTL) in
 * DynamoDB; nothing in Redis, which keeps records as plain keys.
 *
 * `adminIndex`, PostgreSQL's only, builds the index a listing by state reads on a table that has
 * records (`PgIdempotencyMigration.createAdminIndex`: CONCURRENTLY, writes go on).
 *
 * @since 0.1.0
 * @category tags
 */
export class StoreSchema extends Context.Tag("@effect-idempotency/cli/StoreSchema")<
  StoreSchema,
  {
    /** `InvalidStore` for a target that cannot be migrated from here (an admin endpoint). */
    readonly migrate: Effect.Effect<MigrateResult, IdempotencyError.StoreFailure | InvalidStore>
    readonly adminIndex?: Effect.Effect<MigrateResult, IdempotencyError.StoreFailure> | undefined
  }
>() {}

/**
 * The admin service, the store and its schema for a target, on clients of their own that live as
 * long as the layer. A PostgreSQL or MariaDB server that cannot be reached, or a SQLite file that
 * cannot be opened, fails the layer with `StoreUnavailable` (within 5 seconds); Redis, DynamoDB and
 * a libSQL server connect on the first call, whose time the store bounds. An invalid table name or
 * key prefix fails it with `InvalidStore`, before anything is opened.
 *
 * Only the target's store package and driver are loaded (`import()`): the others' are never read.
 * `sqlite:` needs `@effect/sql-sqlite-node` installed beside the CLI (an optional peer dependency,
 * for its native better-sqlite3): without it the layer fails with `InvalidStore`, which says so.
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
      Mysql: (target) => Effect.map(Effect.promise(() => import("./internal/stores/mysql.js")), (m) => m.layer(target)),
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
 * The admin service and the schema of a target: `layer`'s, and for an admin endpoint the admin
 * service through it (`IdempotencyAdminApi.layerClient` of `@effect-idempotency/platform`, over
 * fetch), whose `migrate` fails with `InvalidStore` (a store behind an endpoint is migrated where it
 * runs). This is what the commands use.
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
