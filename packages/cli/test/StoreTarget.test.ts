/**
 * Which store a URL names, and the names its layer gets, without a process or a server.
 */
import { StoreTarget } from "@effect-idempotency/cli"
import { assert, describe, it } from "@effect/vitest"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"

const resolve = (store: string | undefined, env: Record<string, string> = {}, table?: string) =>
  StoreTarget.resolve({
    store: Option.map(Option.fromNullable(store), Redacted.make),
    table: Option.fromNullable(table),
    schema: Option.none(),
    prefix: Option.none(),
    keyAttribute: Option.none(),
    ttlAttribute: Option.none()
  }).pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env)))))

/** The target with its secrets revealed, for comparison. */
const revealed = (target: StoreTarget.StoreTarget) =>
  Object.fromEntries(
    Object.entries(target).map(([name, value]) => [name, Redacted.isRedacted(value) ? Redacted.value(value) : value])
  )

describe("StoreTarget.resolve", () => {
  it.effect("mysql:// and mariadb:// name a MariaDB store, on a mysql:// URL, with --table else IDEMPOTENCY_TABLE", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(revealed(yield* resolve("mysql://app:pw@db:3306/app")), {
        _tag: "MariaDb",
        url: "mysql://app:pw@db:3306/app",
        table: undefined
      })
      assert.deepStrictEqual(
        revealed(yield* resolve("MariaDB://app:pw@db/app?ssl={}", { IDEMPOTENCY_TABLE: "from_env" })),
        { _tag: "MariaDb", url: "mysql://app:pw@db/app?ssl={}", table: "from_env" }
      )
      assert.deepStrictEqual(
        revealed(yield* resolve(undefined, { DATABASE_URL: "mariadb://db/app", IDEMPOTENCY_TABLE: "t" }, "flag")),
        { _tag: "MariaDb", url: "mysql://db/app", table: "flag" }
      )
    }))

  it("StoreTarget.Mysql, deprecated, still constructs a MariaDB target; the other constructors, $is and $match work", () => {
    const url = Redacted.make("mysql://db/app")
    const target = StoreTarget.StoreTarget.Mysql({ url, table: "t" })
    assert.deepStrictEqual(target, StoreTarget.StoreTarget.MariaDb({ url, table: "t" }))
    assert.isTrue(StoreTarget.StoreTarget.$is("MariaDb")(target))
    assert.strictEqual(StoreTarget.StoreTarget.Sqlite({ filename: "f.db", table: undefined })._tag, "Sqlite")
    assert.strictEqual(
      StoreTarget.StoreTarget.$match(target, {
        Postgres: () => "Postgres",
        MariaDb: () => "MariaDb",
        Sqlite: () => "Sqlite",
        Libsql: () => "Libsql",
        Endpoint: () => "Endpoint",
        Redis: () => "Redis",
        DynamoDb: () => "DynamoDb"
      }),
      "MariaDb"
    )
  })

  it.effect("sqlite:<path> and sqlite:///<absolute path> name a SQLite file, as written", () =>
    Effect.gen(function*() {
      for (
        const [url, filename] of [
          ["sqlite:records.db", "records.db"],
          ["sqlite:./data/my records.db", "./data/my records.db"],
          ["sqlite:/srv/records.db", "/srv/records.db"],
          ["sqlite:///srv/records.db", "/srv/records.db"]
        ]
      ) {
        assert.deepStrictEqual(revealed(yield* resolve(url)), { _tag: "Sqlite", filename, table: undefined }, url)
      }
      for (const url of ["sqlite:", "sqlite://host/records.db"]) {
        const refused = yield* Effect.either(resolve(url))
        assert.isTrue(Either.isLeft(refused) && refused.left._tag === "InvalidStore", url)
      }
    }))

  it.effect("file: and libsql:// name a libSQL store, the URL as given, the token from LIBSQL_AUTH_TOKEN", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(revealed(yield* resolve("file:records.db")), {
        _tag: "Libsql",
        url: "file:records.db",
        authToken: undefined,
        table: undefined
      })
      assert.deepStrictEqual(revealed(yield* resolve("libsql://db.turso.io", { LIBSQL_AUTH_TOKEN: "token" }, "t")), {
        _tag: "Libsql",
        url: "libsql://db.turso.io",
        authToken: "token",
        table: "t"
      })
    }))

  it.effect("an unknown scheme is refused, listing the known ones, without the URL", () =>
    Effect.gen(function*() {
      const refused = yield* Effect.flip(resolve("mongodb://admin:s3cret@db/app"))
      assert.strictEqual(refused._tag, "InvalidStore")
      assert.include(refused.message, "mysql://, mariadb://, sqlite:, file:, libsql://")
      assert.notInclude(refused.message, "s3cret")
    }))

  it.effect("--endpoint (or IDEMPOTENCY_ADMIN_ENDPOINT) names an admin endpoint, its token from --token or IDEMPOTENCY_ADMIN_TOKEN", () =>
    Effect.gen(function*() {
      const endpoint = (
        options: { readonly store?: string; readonly endpoint?: string; readonly token?: string },
        env: Record<string, string> = {}
      ) =>
        StoreTarget.resolve({
          store: Option.map(Option.fromNullable(options.store), Redacted.make),
          table: Option.none(),
          schema: Option.none(),
          prefix: Option.none(),
          keyAttribute: Option.none(),
          ttlAttribute: Option.none(),
          endpoint: Option.fromNullable(options.endpoint),
          token: Option.map(Option.fromNullable(options.token), Redacted.make)
        }).pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env)))))
      assert.deepStrictEqual(
        revealed(yield* endpoint({ endpoint: "https://orders.example/admin/" }, { IDEMPOTENCY_ADMIN_TOKEN: "t-env" })),
        { _tag: "Endpoint", url: "https://orders.example/admin", token: "t-env" }
      )
      assert.deepStrictEqual(
        revealed(
          yield* endpoint({ token: "t-flag" }, {
            IDEMPOTENCY_ADMIN_ENDPOINT: "http://127.0.0.1:8787/admin",
            IDEMPOTENCY_ADMIN_TOKEN: "t-env"
          })
        ),
        { _tag: "Endpoint", url: "http://127.0.0.1:8787/admin", token: "t-flag" }
      )
      // an explicit --store wins over the environment's endpoint
      assert.strictEqual(
        (yield* endpoint({ store: "redis://127.0.0.1:6379" }, { IDEMPOTENCY_ADMIN_ENDPOINT: "https://x.example" }))
          ._tag,
        "Redis"
      )
      for (
        const [options, env] of [
          [{ endpoint: "https://orders.example/admin" }, {}],
          [{ endpoint: "https://orders.example/admin", store: "redis://127.0.0.1:6379", token: "t" }, {}],
          [{ endpoint: "ftp://orders.example/admin", token: "t" }, {}],
          [{ endpoint: "https://user:secret@orders.example/admin", token: "t" }, {}],
          [{ endpoint: "not a url", token: "t" }, {}]
        ] as const
      ) {
        const refused = yield* Effect.either(endpoint(options, env))
        assert.isTrue(Either.isLeft(refused) && refused.left._tag === "InvalidStore", JSON.stringify(options))
        assert.isTrue(Either.isLeft(refused) && !refused.left.message.includes("secret"))
      }
    }))
})
