/**
 * The `effect-idempotency` command line, on `@effect/cli`, over `IdempotencyAdmin`: its commands,
 * output and exit codes are in README.md.
 *
 * @example
 * ```ts
 * import { Cli } from "@effect-idempotency/cli"
 * import { NodeContext } from "@effect/platform-node"
 * import { Effect } from "effect"
 *
 * // the exit code of `effect-idempotency --help`
 * const code = Cli.run(["node", "effect-idempotency", "--help"]).pipe(Effect.provide(NodeContext.layer))
 * ```
 *
 * @since 0.1.0
 */
import { IdempotencyAdmin, IdempotencyEncryption, IdempotencyError, IdempotencyKey } from "@effect-idempotency/core"
import * as Args from "@effect/cli/Args"
import type * as CliApp from "@effect/cli/CliApp"
import * as Command from "@effect/cli/Command"
import * as HelpDoc from "@effect/cli/HelpDoc"
import * as Options from "@effect/cli/Options"
import * as ValidationError from "@effect/cli/ValidationError"
import * as Cause from "effect/Cause"
import * as Config from "effect/Config"
import * as ConfigError from "effect/ConfigError"
import * as Console from "effect/Console"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Option from "effect/Option"
import { InvalidStore, RecordNotFound } from "./CliError.js"
import * as ExitCode from "./ExitCode.js"
import * as render from "./internal/render.js"
import * as StoreTarget from "./StoreTarget.js"

/**
 * The CLI's version, shown by `--version`.
 *
 * @since 0.1.0
 * @category constants
 */
export const version = "0.1.0"

/**
 * What a command printed: the JSON value of `--json`, and the text for people.
 *
 * @since 0.1.0
 * @category models
 */
export interface Report {
  readonly json: unknown
  readonly text: string
}

const json = Options.boolean("json").pipe(
  Options.withDescription("Print one JSON object on stdout instead of a table (for scripts).")
)

/** An option that may be left out, shown as `--name <pseudoName>` in the help. */
const optional = <A>(option: Options.Options<A>, pseudoName: string, description: string) =>
  option.pipe(Options.withPseudoName(pseudoName), Options.withDescription(description), Options.optional)

const storeOptions = {
  store: optional(
    Options.redacted("store"),
    "url",
    "The store: postgres://…, mysql://… or mariadb://…, sqlite:<path>, file:<path> or libsql://… (libSQL; " +
      "LIBSQL_AUTH_TOKEN), redis://… or rediss://…, or dynamodb://<table>?region=…&endpoint=…. " +
      "Default: DATABASE_URL, else REDIS_URL, else DynamoDB when AWS_REGION or DYNAMODB_ENDPOINT is set."
  ),
  endpoint: optional(
    Options.text("endpoint"),
    "url",
    "Instead of a store: an admin endpoint (IdempotencyAdminApi of @effect-idempotency/platform) in front of a " +
      "store only its platform reaches (D1, Durable Objects, a private network). Default: IDEMPOTENCY_ADMIN_ENDPOINT."
  ),
  token: optional(
    Options.redacted("token"),
    "token",
    "The admin endpoint's token. Default: IDEMPOTENCY_ADMIN_TOKEN (prefer it: a command line shows in ps)."
  ),
  table: optional(
    Options.text("table"),
    "name",
    "The table (SQL stores, DynamoDB). Default: IDEMPOTENCY_TABLE, else idempotency_records (SQL stores) " +
      "or the table of the dynamodb:// URL, else idempotency (DynamoDB)."
  ),
  schema: optional(
    Options.text("schema"),
    "name",
    "The PostgreSQL schema of the table. Default: the connection's search_path."
  ),
  prefix: optional(
    Options.text("prefix"),
    "prefix",
    "The key prefix (Redis). Default: IDEMPOTENCY_PREFIX, else idempotency:."
  ),
  keyAttribute: optional(
    Options.text("key-attribute"),
    "name",
    "The partition key attribute (DynamoDB). Default: IDEMPOTENCY_KEY_ATTRIBUTE, else id."
  ),
  ttlAttribute: optional(
    Options.text("ttl-attribute"),
    "name",
    "The TTL attribute (DynamoDB). Default: IDEMPOTENCY_TTL_ATTRIBUTE, else ttl."
  ),
  json
}

const operation = Args.text({ name: "operation" }).pipe(
  Args.withDescription("The operation's name, as given to Idempotency.make (name).")
)

const key = Args.text({ name: "key" }).pipe(
  Args.withDescription("The idempotency key.")
)

const scope = optional(
  Options.text("scope"),
  "scope",
  "The scope the key was used in (a tenant, a user), when the operation has one."
)

const usage = (message: string) => ValidationError.invalidValue(HelpDoc.p(message))

const states: ReadonlyArray<IdempotencyAdmin.State> = ["running", "stuck", "completed", "unknown", "omitted", "failed"]

const limitOption = (description: string) =>
  optional(
    Options.integer("limit").pipe(
      Options.mapEffect((limit) =>
        limit >= 1 && limit <= 1000
          ? Effect.succeed(limit)
          : Effect.fail(usage("--limit is a whole number from 1 to 1000"))
      )
    ),
    "n",
    description
  )

const validKey = (input: string) =>
  Either.match(IdempotencyKey.validate(input), { onLeft: Effect.fail, onRight: Effect.succeed })

/** After the arguments are checked: an invalid key never reaches a store. */
const provideStore = <A, E, R>(
  options: StoreTarget.StoreOptions,
  effect: Effect.Effect<A, E, R>
) =>
  effect.pipe(
    Effect.provide(Layer.unwrapEffect(Effect.map(StoreTarget.resolve(options), StoreTarget.adminLayer)))
  )

/**
 * `provideStore`, with the admin opening sealed outcomes (`IdempotencyEncryption.layerAdmin`) when
 * `IDEMPOTENCY_KEYS` lists the keys; through an admin endpoint, outcomes show as the endpoint sends them.
 */
const provideOpening = <A, E>(
  options: StoreTarget.StoreOptions,
  effect: Effect.Effect<A, E, IdempotencyAdmin.IdempotencyAdmin>
) =>
  Effect.flatMap(
    Config.option(IdempotencyEncryption.keysConfig("IDEMPOTENCY_KEYS")),
    (keys) =>
      Option.isNone(keys) ?
        provideStore(options, effect) :
        Effect.flatMap(StoreTarget.resolve(options), (target) =>
          target._tag === "Endpoint"
            ? provideStore(options, effect)
            : Effect.provide(
              effect,
              IdempotencyEncryption.layerAdmin({ keys: keys.value }).pipe(
                Layer.provide(StoreTarget.layer(target)),
                Layer.mapError((error) =>
                  error._tag === "InvalidKeys" ? ConfigError.InvalidData(["IDEMPOTENCY_KEYS"], error.message) : error
                )
              )
            ))
  )

const print = (asJson: boolean, report: Report) =>
  Console.log(asJson ? JSON.stringify(report.json, null, 2) : report.text)

const recordFields = (record: IdempotencyAdmin.RecordInfo): ReadonlyArray<readonly [string, string]> => [
  ["operation", record.operation],
  ...(record.scope === undefined ? [] : [["scope", record.scope] as const]),
  ["key", record.key],
  ["key hash", IdempotencyKey.hash(record.key)],
  ["state", record.state],
  ["status", record.status],
  ["attempt", String(record.attempt)],
  [record.status === "IN_PROGRESS" ? "lease until" : "lease ended", render.instant(record.leaseUntil, record.readAt)],
  ["expires", render.instant(record.expiresAt, record.readAt)],
  ["fingerprint", record.fingerprint],
  ["outcome", record.outcome === undefined ? "-" : `${record.outcome.kind} (${record.outcome.bytes} bytes)`],
  ...(record.outcomeText === undefined ? [] : [["outcome text", render.printable(record.outcomeText, 2000)] as const])
]

const shellWord = (word: string) => /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", "'\\''")}'`

const nextStep = (record: IdempotencyAdmin.RecordInfo): string => {
  const scoped = record.scope === undefined ? "" : ` --scope ${shellWord(record.scope)}`
  switch (record.state) {
    case "stuck":
    case "unknown":
    case "failed":
      return `To let the next attempt run: effect-idempotency unblock ${shellWord(record.operation)} ${
        shellWord(record.key)
      }${scoped} --expect-attempt ${record.attempt} --reason '<why>'`
    case "running":
      return "An attempt holds a live lease: wait for it, or for its lease to end."
    case "completed":
      return "A retry replays the recorded outcome until the record expires."
    case "omitted":
      return "The outcome was too large to keep: a retry fails with OutcomeNotReplayable until the record expires."
  }
}

const inspect = Command.make(
  "inspect",
  {
    ...storeOptions,
    operation,
    key,
    scope,
    outcome: Options.boolean("outcome").pipe(
      Options.withDescription(
        "Include the recorded outcome's text; a sealed one (IdempotencyEncryption) is opened when " +
          "IDEMPOTENCY_KEYS lists its key."
      )
    )
  },
  (args) =>
    Effect.flatMap(validKey(args.key), (valid) =>
      Effect.gen(function*() {
        const admin = yield* IdempotencyAdmin.IdempotencyAdmin
        const found = yield* admin.get(
          { operation: args.operation, key: valid, scope: Option.getOrUndefined(args.scope) },
          { outcome: args.outcome }
        )
        if (Option.isNone(found)) {
          return yield* new RecordNotFound({ operation: args.operation, keyHash: IdempotencyKey.hash(valid) })
        }
        const record = found.value
        yield* print(args.json, {
          json: { record },
          text: `${render.fields(recordFields(record))}\n\n${nextStep(record)}`
        })
      }).pipe((effect) => args.outcome ? provideOpening(args, effect) : provideStore(args, effect)))
).pipe(Command.withDescription("What happened to a key: its record's state, attempt, lease, expiry and outcome."))

const list = Command.make(
  "list",
  {
    ...storeOptions,
    state: Options.choice("state", states).pipe(
      Options.withDescription("Only records in this state (stuck: in progress past its lease)."),
      Options.optional
    ),
    operation: optional(Options.text("operation"), "name", "Only this operation's records."),
    olderThan: optional(
      Options.text("older-than").pipe(
        Options.mapEffect((input) =>
          Option.match(Duration.decodeUnknown(input), {
            onNone: () =>
              Effect.fail(usage("--older-than is a duration such as \"30 seconds\", \"10 minutes\" or \"2 hours\"")),
            onSome: Effect.succeed
          })
        )
      ),
      "duration",
      "Only records whose lease ended at least this long ago: \"10 minutes\", \"2 hours\"."
    ),
    limit: limitOption("At most this many records (1 to 1000, default 100)."),
    cursor: optional(Options.text("cursor"), "cursor", "Continue from the cursor a previous page printed.")
  },
  (args) =>
    Effect.gen(function*() {
      const admin = yield* IdempotencyAdmin.IdempotencyAdmin
      const page = yield* admin.list({
        state: Option.getOrUndefined(args.state),
        operation: Option.getOrUndefined(args.operation),
        olderThan: Option.getOrUndefined(args.olderThan),
        limit: Option.getOrUndefined(args.limit),
        cursor: Option.getOrUndefined(args.cursor)
      })
      const rows = page.records.map((record) => [
        record.operation,
        record.scope ?? "-",
        record.key,
        record.state,
        String(record.attempt),
        record.status === "IN_PROGRESS"
          ? `${record.leaseUntil > record.readAt ? "ends in" : "ended"} ${
            render.span(Math.abs(record.leaseUntil - record.readAt))
          }${record.leaseUntil > record.readAt ? "" : " ago"}`
          : "-",
        `in ${render.span(record.expiresAt - record.readAt)}`
      ])
      const more = page.cursor === undefined ? "" : `\n\nMore records: add --cursor ${shellWord(page.cursor)}`
      yield* print(args.json, {
        json: { records: page.records, cursor: page.cursor ?? null },
        text: page.records.length === 0
          ? `No records.${more}`
          : `${render.table(["OPERATION", "SCOPE", "KEY", "STATE", "ATTEMPT", "LEASE", "EXPIRES"], rows)}${more}`
      })
    }).pipe((effect) => provideStore(args, effect))
).pipe(Command.withDescription("Records by state, operation and age, a page at a time."))

const unblock = Command.make(
  "unblock",
  {
    ...storeOptions,
    operation,
    key,
    scope,
    reason: Options.text("reason").pipe(
      Options.withPseudoName("text"),
      Options.withDescription("Why (an incident, a ticket): logged with the operation and the key's hash.")
    ),
    expectAttempt: Options.integer("expect-attempt").pipe(
      Options.withPseudoName("n"),
      Options.withDescription(
        "The attempt inspect or list showed: the record is deleted only while it is still that attempt."
      )
    )
  },
  (args) =>
    Effect.flatMap(validKey(args.key), (valid) =>
      Effect.gen(function*() {
        const admin = yield* IdempotencyAdmin.IdempotencyAdmin
        yield* admin.unblock(
          { operation: args.operation, key: valid, scope: Option.getOrUndefined(args.scope) },
          { reason: args.reason, expect: { attempt: args.expectAttempt } }
        )
        yield* print(args.json, {
          json: {
            unblocked: true,
            operation: args.operation,
            scope: Option.getOrNull(args.scope),
            keyHash: IdempotencyKey.hash(valid),
            attempt: args.expectAttempt
          },
          text: `Unblocked attempt ${args.expectAttempt} of ${args.operation} (key hash ${
            IdempotencyKey.hash(valid)
          }): the next retry executes.`
        })
      }).pipe((effect) => provideStore(args, effect)))
).pipe(
  Command.withDescription(
    "Make a stuck, unknown or failed key run again: deletes its record in one conditional write, only while " +
      "it is the attempt given, never a live lease or a recorded outcome."
  )
)

const stats = Command.make(
  "stats",
  storeOptions,
  (args) =>
    Effect.gen(function*() {
      const admin = yield* IdempotencyAdmin.IdempotencyAdmin
      const counts = yield* admin.stats
      yield* print(args.json, {
        json: { counts },
        text: counts.length === 0
          ? "No records."
          : render.table(
            ["OPERATION", "STATE", "COUNT"],
            counts.map((count) => [count.operation, count.state, String(count.count)])
          )
      })
    }).pipe((effect) => provideStore(args, effect))
).pipe(Command.withDescription("Counts of live records by operation and state."))

const purge = Command.make(
  "purge",
  { ...storeOptions, limit: limitOption("Delete at most this many expired records (1 to 1000, default 1000).") },
  (args) =>
    Effect.gen(function*() {
      const admin = yield* IdempotencyAdmin.IdempotencyAdmin
      const purged = yield* admin.purge({ limit: Option.getOrElse(args.limit, () => 1000) })
      yield* print(args.json, { json: { purged }, text: `Purged ${purged} expired records.` })
    }).pipe((effect) => provideStore(args, effect))
).pipe(Command.withDescription("Delete expired records (the store also expires them by itself)."))

const migrate = Command.make(
  "migrate",
  {
    ...storeOptions,
    adminIndex: Options.boolean("admin-index").pipe(
      Options.withDescription(
        "PostgreSQL: also build the index that list --state reads, on a table that has records " +
          "(CREATE INDEX CONCURRENTLY: writes go on while it builds). A new table gets it from migrate itself."
      )
    )
  },
  (args) =>
    Effect.gen(function*() {
      const schema = yield* StoreTarget.StoreSchema
      const adminIndex = args.adminIndex ? schema.adminIndex : undefined
      if (args.adminIndex && adminIndex === undefined) {
        return yield* new InvalidStore({ reason: "--admin-index is for a PostgreSQL store" })
      }
      const migrated = yield* schema.migrate
      const result = adminIndex === undefined
        ? migrated
        : { ...migrated, detail: `${migrated.detail}; ${(yield* adminIndex).detail}` }
      yield* print(args.json, {
        json: result,
        text: `${result.applied ? "Migrated" : "Nothing to migrate"}: ${result.detail}.`
      })
    }).pipe((effect) => provideStore(args, effect))
).pipe(
  Command.withDescription(
    "Create what the store needs: the PostgreSQL table and its function, the MariaDB, SQLite or libSQL table, " +
      "the DynamoDB table with native TTL. Redis has no schema. Safe to run again."
  )
)

/**
 * The root command and its subcommands.
 *
 * @since 0.1.0
 * @category commands
 */
export const command = Command.make("effect-idempotency").pipe(
  Command.withDescription(
    "See and act on the records of an effect-idempotency store: what happened to a key, and making it run again safely."
  ),
  Command.withSubcommands([inspect, list, unblock, stats, purge, migrate])
)

const cliApp = Command.run(command, { name: "effect-idempotency", version })

const describeError = (error: unknown): { readonly tag: string; readonly message: string } => {
  if (ValidationError.isValidationError(error)) {
    return { tag: "Usage", message: "invalid command line (see --help)" }
  }
  const tag = typeof error === "object" && error !== null && "_tag" in error ? String(error._tag) : "Error"
  const detail = error instanceof IdempotencyError.StoreUnavailable || error instanceof IdempotencyError.StoreError
    ? `: ${causeMessage(error.cause)}`
    : ""
  const message = error instanceof Error ? error.message : String(error)
  return { tag, message: render.printable(`${message}${detail}`, 500) }
}

const causeMessage = (cause: unknown): string => {
  const message = cause instanceof Error ? cause.message : typeof cause === "string" ? cause : ""
  const nested = cause instanceof Error && cause.cause !== undefined ? causeMessage(cause.cause) : ""
  return [message, nested].filter((part) => part !== "").join(": ") || "no detail"
}

const fields = (error: unknown): Record<string, unknown> => {
  if (error instanceof IdempotencyAdmin.UnblockRefused) {
    return { reason: error.reason, ...(error.attempt === undefined ? {} : { attempt: error.attempt }) }
  }
  if (error instanceof IdempotencyError.InvalidIdempotencyKey) return { reason: error.reason }
  return {}
}

/**
 * Runs the command line `argv` (as `process.argv`) and returns its exit code (README.md#exit-codes).
 *
 * @since 0.1.0
 * @category running
 */
export const run = (argv: ReadonlyArray<string>): Effect.Effect<number, never, CliApp.CliApp.Environment> => {
  const asJson = argv.includes("--json")
  return cliApp(argv).pipe(
    Effect.as(ExitCode.Ok),
    Effect.catchAllCause((cause) => {
      const error = Option.getOrElse(Cause.failureOption(cause), () => Cause.squash(cause))
      const code = Cause.isFailType(cause) || Option.isSome(Cause.failureOption(cause))
        ? ExitCode.ofError(error)
        : ExitCode.Internal
      const { message, tag } = describeError(error)
      return Effect.zipRight(
        ValidationError.isValidationError(error) ? Effect.void : Console.error(`effect-idempotency: ${message}`),
        asJson
          ? Console.log(JSON.stringify({ error: { _tag: tag, exitCode: code, message, ...fields(error) } }, null, 2))
          : Effect.void
      ).pipe(Effect.as(code))
    }),
    Effect.provide(Logger.replace(Logger.defaultLogger, Logger.withConsoleError(Logger.logfmtLogger)))
  )
}
