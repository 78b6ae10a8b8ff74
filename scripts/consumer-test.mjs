#!/usr/bin/env node
/* global console, process */
/**
 * The consumer test: the packages as a user gets them from the registry.
 *
 * 1. Builds every published package (incrementally; a clean `npm run build` when a `dist` is missing)
 *    and packs each with `npm pack` into a temporary folder outside the workspace. Reads each
 *    tarball: every relative link of its README.md must name a file (or folder) inside the tarball,
 *    and every link to this repository on GitHub (`…/blob/main/PATH`) a path of the repository.
 * 2. In a new project there, runs the root README's install line as written (each
 *    `@effect-idempotency/*` name replaced by its tarball), then installs every tarball, a second
 *    copy of the core under another name, and each third-party peer at the lowest version its
 *    range admits. Runs the CLI the tarball of `@effect-idempotency/cli` installs
 *    (`npx effect-idempotency --help` on every command, and a usage error's exit code).
 * 3. Extracts every snippet marked `<!-- consumer-test: NAME [exports: a, b] -->` in the READMEs,
 *    type-checks them with the runners of `scripts/consumer-test/` (`strict`,
 *    `exactOptionalPropertyTypes`, `skipLibCheck: false`, no `source` condition), and runs the
 *    runners from the emitted JavaScript: the packages load from their `dist`.
 *
 * Every step has a time limit; any failure ends the run with a non-zero exit code.
 * `CONSUMER_TEST_KEEP=1` keeps the temporary project.
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import * as zlib from "node:zlib"
import { published } from "./published.mjs"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
const runnersDir = path.join(root, "scripts", "consumer-test")
const readmes = ["README.md", ...published.map((name) => path.join("packages", name, "README.md"))]

/** Snippets that must be marked somewhere: a README that loses one fails the test. */
const requiredSnippets = ["install", "quickstart", "sql", "sql-pg", "sql-pg-migrate", "dynamodb"]
/** Runners, in order; each is `scripts/consumer-test/NAME.ts`, run with a time limit. */
const runners = ["imports", "quickstart", "sql", "sql-pg", "dynamodb", "two-copies"]
/** Helpers the runners import, copied beside them (JavaScript with a declaration file). */
const helpers = ["embedded.mjs", "embedded.d.mts"]

/** Tools the runners use, at the versions the workspace uses. */
const tools = [
  "@types/node",
  // @effect/platform-node's declarations import `ws`: with skipLibCheck off, its types are needed
  "@types/ws@8.18.2",
  "@types/pg",
  "@electric-sql/pglite",
  "@electric-sql/pglite-socket",
  "@effect/platform-node",
  // the SQL store's README snippet runs on a libSQL file (prebuilt binaries from the registry)
  "@effect/sql-libsql",
  "dynalite"
]

const started = Date.now()
const step = (title) => console.log(`\nconsumer-test [${Math.round((Date.now() - started) / 1000)} s] ${title}`)

const fail = (message) => {
  console.error(`consumer-test: FAILED: ${message}`)
  process.exit(1)
}

/** Runs a command with a time limit; its output goes to ours unless `capture` is set. */
const run = (command, args, { cwd = root, timeoutSeconds, capture = false, env = {} }) => {
  const result = spawnSync(command, args, {
    cwd,
    env: { ...process.env, ...env },
    stdio: capture ? ["ignore", "pipe", "inherit"] : "inherit",
    encoding: "utf8",
    timeout: timeoutSeconds * 1000,
    killSignal: "SIGKILL",
    maxBuffer: 64 * 1024 * 1024
  })
  if (result.error !== undefined) fail(`${command} ${args.join(" ")}: ${result.error.message}`)
  if (result.status !== 0) {
    fail(`${command} ${args.join(" ")} exited with ${result.status ?? result.signal}`)
  }
  return result.stdout
}

const readJson = (file) => JSON.parse(fs.readFileSync(file, "utf8"))
const workspaceVersion = (name) => {
  const file = path.join(root, "node_modules", name, "package.json")
  if (!fs.existsSync(file)) fail(`${name} is not installed in the workspace (run npm ci)`)
  return readJson(file).version
}
/** The lowest version a peer range admits: its first `x.y.z` (`^3.22.4` is 3.22.4, `^5.11.1 || ^6` is 5.11.1). */
const lowest = (name, range) => {
  const match = /(\d+\.\d+\.\d+)/.exec(range)
  if (match === null) fail(`cannot read the lowest version of ${name}@${range}`)
  return match[1]
}

/**
 * The regular files of a tarball as `npm pack` writes it (ustar, with pax or GNU long names), by
 * their path under the tarball's top folder (`package/`): `README.md`, `dist/index.js`, ….
 */
const readTarball = (file) => {
  const tar = zlib.gunzipSync(fs.readFileSync(file))
  const files = new Map()
  let longName
  for (let offset = 0; offset + 512 <= tar.length;) {
    const header = tar.subarray(offset, offset + 512)
    if (header.every((byte) => byte === 0)) break
    const field = (start, length) => header.toString("utf8", start, start + length).replace(/\0[\s\S]*$/, "")
    const size = parseInt(field(124, 12).trim() || "0", 8)
    const type = field(156, 1) || "0"
    const body = tar.subarray(offset + 512, offset + 512 + size)
    offset += 512 + Math.ceil(size / 512) * 512
    if (type === "x") {
      longName = /(?:^|\n)\d+ path=([^\n]*)\n/.exec(body.toString("utf8"))?.[1] ?? longName
      continue
    }
    if (type === "L") {
      longName = body.toString("utf8").replace(/\0[\s\S]*$/, "")
      continue
    }
    const prefix = field(345, 155)
    const name = longName ?? (prefix === "" ? field(0, 100) : `${prefix}/${field(0, 100)}`)
    longName = undefined
    if (type === "0" || type === "7") files.set(name.replace(/^[^/]+\//, ""), body)
  }
  return files
}

/**
 * The link targets of a markdown text: inline links and images, reference definitions, and the
 * `href`/`src` of HTML tags; code blocks, code spans and HTML comments are not read.
 */
const markdownLinks = (markdown) => {
  const prose = markdown
    .replace(/^ {0,3}(`{3,}|~{3,})[^\n]*\n[\s\S]*?(?:\n {0,3}\1[`~]*[ \t]*(?=\n|(?![\s\S]))|(?![\s\S]))/gm, "")
    .replace(/<!--[\s\S]*?-->/g, "")
    .replace(/(`+)[\s\S]*?\1/g, "")
  return [
    ...[...prose.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+["'(][^)]*)?\)/g)].map((match) => match[1]),
    ...[...prose.matchAll(/^ {0,3}\[[^\]\n]+\]:\s*<?([^\s>]+)>?/gm)].map((match) => match[1]),
    ...[...prose.matchAll(/<(?:a|img|source)\b[^>]*?\s(?:href|src)\s*=\s*["']([^"']+)["']/gi)].map((match) => match[1])
  ]
}

/** This repository on GitHub, from the root manifest: `https://github.com/OWNER/NAME`. */
const repositoryUrl = (() => {
  const { repository } = readJson(path.join(root, "package.json"))
  const url = typeof repository === "string" ? repository : repository?.url
  const match = /github\.com[/:]([^/]+\/[^/]+?)(?:\.git)?\/?$/.exec(url ?? "")
  if (match === null) fail(`the root package.json's repository.url is not a GitHub repository: ${url}`)
  return `https://github.com/${match[1]}`
})()

/**
 * Why a README link is dead, or `undefined`: a relative link must name a file or folder of the
 * tarball (`files`, paths relative to the package); a link to this repository's `main` branch on
 * GitHub must name a path of the workspace.
 */
const deadLink = (link, files) => {
  const decode = (target) => {
    try {
      return decodeURIComponent(target)
    } catch {
      return target
    }
  }
  const exists = (target) =>
    files.has(target) || [...files.keys()].some((file) => file.startsWith(`${target.replace(/\/$/, "")}/`))
  const github = `${repositoryUrl}/`
  if (link.startsWith(github)) {
    const match = /^(?:blob|tree|raw)\/main\/([^?#]+)/.exec(link.slice(github.length))
    if (match === null) return undefined
    const target = path.posix.normalize(decode(match[1]))
    return fs.existsSync(path.join(root, ...target.split("/"))) ? undefined : `${target} is not in the repository`
  }
  if (link.startsWith("#") || /^[a-z][a-z\d+.-]*:/i.test(link) || link.startsWith("//")) return undefined
  if (link.startsWith("/")) return "a root-relative link resolves on no registry page"
  const target = path.posix.normalize(decode(link.replace(/[?#].*$/, "")))
  if (target === "" || target === ".") return undefined
  if (target.startsWith("../")) return "it points outside the package"
  return exists(target) ? undefined : `${target} is not in the tarball (the package's "files")`
}

const tsc = path.join(root, "node_modules", "typescript", "bin", "tsc")
const npm = process.platform === "win32" ? "npm.cmd" : "npm"
const npmQuiet = ["--no-audit", "--no-fund", "--loglevel=error", "--prefer-offline"]

// ── 1. build and pack ────────────────────────────────────────────────────────────────────────────
step("build (incremental)")
run(process.execPath, [tsc, "-b", "tsconfig.build.json"], { timeoutSeconds: 300 })
const missing = published.filter((name) =>
  !["index.js", "index.d.ts", "index.js.map"].every((file) =>
    fs.existsSync(path.join(root, "packages", name, "dist", file))
  )
)
if (missing.length > 0) {
  step(`a dist is missing (${missing.join(", ")}): clean build`)
  run(npm, ["run", "build"], { timeoutSeconds: 300 })
}

const work = fs.mkdtempSync(path.join(os.tmpdir(), "effect-idempotency-consumer-"))
if (work.startsWith(root)) fail(`the temporary folder ${work} is inside the workspace`)
const tarballs = path.join(work, "tarballs")
fs.mkdirSync(tarballs)
process.on("exit", () => {
  if (process.env.CONSUMER_TEST_KEEP === "1") console.log(`consumer-test: kept ${work}`)
  else fs.rmSync(work, { recursive: true, force: true })
})

step("npm pack")
for (const name of published) {
  const manifest = readJson(path.join(root, "packages", name, "package.json"))
  if (manifest.scripts?.prepack !== "npm run build") fail(`${manifest.name} does not build before packing (prepack)`)
}
// the build above is what each package's prepack would run: pack without running it again
const packed = JSON.parse(
  run(npm, [
    "pack",
    "--ignore-scripts",
    "--json",
    "--pack-destination",
    tarballs,
    ...published.flatMap((name) => ["-w", `packages/${name}`])
  ], { timeoutSeconds: 120, capture: true })
)
const tarballOf = new Map()
for (const entry of packed) {
  const files = new Set(entry.files.map((file) => file.path))
  for (const file of ["dist/index.js", "dist/index.d.ts", "dist/index.js.map", "LICENSE", "package.json"]) {
    if (!files.has(file)) fail(`${entry.name}'s tarball lacks ${file}`)
  }
  // a package's README is shipped when it has one
  const readme = path.join(root, "packages", entry.name.replace("@effect-idempotency/", ""), "README.md")
  if (fs.existsSync(readme) && !files.has("README.md")) fail(`${entry.name}'s tarball lacks README.md`)
  if (!fs.existsSync(readme)) console.log(`  warning: ${entry.name} has no README.md`)
  tarballOf.set(entry.name, path.join(tarballs, entry.filename))
  console.log(`  ${entry.filename}: ${entry.files.length} files, ${Math.round(entry.size / 1024)} KiB`)
}
if (tarballOf.size !== published.length) fail(`packed ${tarballOf.size} packages, expected ${published.length}`)

step("the links of each packed README.md")
const deadLinks = []
for (const entry of packed) {
  const files = readTarball(path.join(tarballs, entry.filename))
  for (const { path: file } of entry.files) {
    if (!files.has(file)) fail(`cannot read ${file} from ${entry.filename}`)
  }
  const readme = files.get("README.md")
  if (readme === undefined) continue
  const links = markdownLinks(readme.toString("utf8"))
  const source = path.posix.join("packages", entry.name.replace("@effect-idempotency/", ""), "README.md")
  for (const link of links) {
    const reason = deadLink(link, files)
    if (reason !== undefined) deadLinks.push(`${entry.name}: the link ${link} in its README.md (${source}): ${reason}`)
  }
  console.log(`  ${entry.name}: ${links.length} ${links.length === 1 ? "link" : "links"}`)
}
if (deadLinks.length > 0) {
  fail(
    `dead links in the packed READMEs (link the file on GitHub, ${repositoryUrl}/blob/main/PATH, or ship it):\n  ${
      deadLinks.join("\n  ")
    }`
  )
}

// ── 2. the consumer project ──────────────────────────────────────────────────────────────────────
step("extract the marked README snippets")
const marker = /<!-- consumer-test: ([\w-]+)(?: exports: ([\w, ]+))? -->\n```(\w+)\n([\s\S]*?)\n```/g
const snippets = new Map()
for (const readme of readmes) {
  const file = path.join(root, readme)
  if (!fs.existsSync(file)) continue
  for (const [, name, exported, lang, body] of fs.readFileSync(file, "utf8").matchAll(marker)) {
    if (snippets.has(name)) fail(`snippet ${name} is marked twice (${snippets.get(name).readme}, ${readme})`)
    snippets.set(name, { readme, lang, body, exported: exported?.split(",").map((s) => s.trim()) ?? [] })
    console.log(`  ${name} (${readme})`)
  }
}
for (const name of requiredSnippets) {
  if (!snippets.has(name)) fail(`no README marks the snippet ${name}`)
}

const app = path.join(work, "app")
fs.mkdirSync(path.join(app, "src", "snippets"), { recursive: true })
fs.writeFileSync(
  path.join(app, "package.json"),
  JSON.stringify({ name: "consumer", version: "0.0.0", private: true, type: "module" }, null, 2) + "\n"
)

step("the README's install line, as written")
const install = snippets.get("install")
const installLine = install.body.trim()
if (!/^npm i(nstall)? /.test(installLine) || installLine.includes("\n")) fail(`unexpected install line: ${installLine}`)
const installArgs = installLine.split(/\s+/).slice(2).map((spec) => {
  if (!spec.startsWith("@effect-idempotency/")) return spec
  const tarball = tarballOf.get(spec)
  if (tarball === undefined) fail(`the install line names ${spec}, which is not a published package`)
  return tarball
})
run(npm, ["install", ...installArgs, ...npmQuiet], { cwd: app, timeoutSeconds: 300 })
run(process.execPath, [
  "--input-type=module",
  "-e",
  "const m = await import('@effect-idempotency/core'); if (typeof m.Idempotency.once !== 'function') process.exit(1)"
], { cwd: app, timeoutSeconds: 60 })

step("install every tarball, a second copy of the core, the peers at their lowest versions, and the tools")
const peers = new Map()
for (const name of published) {
  const manifest = readJson(path.join(root, "packages", name, "package.json"))
  for (const [peer, range] of Object.entries(manifest.peerDependencies ?? {})) {
    if (peer.startsWith("@effect-idempotency/")) continue
    const version = lowest(peer, range)
    if (peers.has(peer) && peers.get(peer) !== version) fail(`${peer}: the packages declare different ranges`)
    peers.set(peer, version)
  }
}
const specs = [
  ...published.map((name) => tarballOf.get(`@effect-idempotency/${name}`)),
  // the same core again, under another name: a second module instance, as a version drift would give
  `@effect-idempotency/core-copy@file:${tarballOf.get("@effect-idempotency/core")}`,
  ...[...peers].map(([peer, version]) => `${peer}@${version}`),
  ...tools.map((name) => name.lastIndexOf("@") > 0 ? name : `${name}@${workspaceVersion(name)}`)
]
console.log(`  peers: ${[...peers].map(([peer, version]) => `${peer}@${version}`).join(", ")}`)
run(npm, ["install", ...specs, ...npmQuiet], { cwd: app, timeoutSeconds: 480 })

step("the CLI from its tarball: npx effect-idempotency --help")
for (
  const args of [
    ["--help"],
    ["--version"],
    ...["inspect", "list", "unblock", "stats", "purge", "migrate"].map((command) => [command, "--help"])
  ]
) {
  const output = run(npm, ["exec", "--no", "--", "effect-idempotency", ...args], {
    cwd: app,
    timeoutSeconds: 60,
    capture: true
  })
  if (!output.includes(args[0] === "--version" ? "0." : "USAGE")) {
    fail(`effect-idempotency ${args.join(" ")} printed ${output}`)
  }
}
// a usage error exits with the documented code (1), and prints the typed error of the library
const invalid = spawnSync(npm, [
  "exec",
  "--no",
  "--",
  "effect-idempotency",
  "inspect",
  "create-order",
  "bad key",
  "--json"
], {
  cwd: app,
  encoding: "utf8",
  timeout: 60_000,
  env: { ...process.env, REDIS_URL: "redis://127.0.0.1:1" }
})
if (invalid.status !== 1 || !invalid.stdout.includes("InvalidIdempotencyKey")) {
  fail(
    `effect-idempotency inspect with an invalid key exited with ${invalid.status ?? invalid.signal}: ${invalid.stdout}`
  )
}

step("type-check the snippets and the runners (strict, exactOptionalPropertyTypes, skipLibCheck: false)")
for (const [name, snippet] of snippets) {
  if (snippet.lang !== "ts") continue
  const exportLine = snippet.exported.length > 0 ? `\nexport { ${snippet.exported.join(", ")} }\n` : "\n"
  fs.writeFileSync(
    path.join(app, "src", "snippets", `${name}.ts`),
    `// extracted from ${snippet.readme}\n${snippet.body}\n${exportLine}`
  )
}
for (const file of [...runners.map((name) => `${name}.ts`), ...helpers]) {
  fs.copyFileSync(path.join(runnersDir, file), path.join(app, "src", file))
}
fs.writeFileSync(
  path.join(app, "tsconfig.json"),
  JSON.stringify(
    {
      compilerOptions: {
        target: "ES2022",
        module: "NodeNext",
        moduleResolution: "NodeNext",
        // @effect/platform's declarations name DOM types (Storage, Crypto)
        lib: ["ES2022", "DOM", "DOM.Iterable"],
        types: ["node"],
        strict: true,
        exactOptionalPropertyTypes: true,
        skipLibCheck: false,
        noEmitOnError: true,
        rootDir: "src",
        outDir: "out"
      },
      include: ["src"]
    },
    null,
    2
  ) + "\n"
)
run(process.execPath, [tsc, "-p", "tsconfig.json"], { cwd: app, timeoutSeconds: 300 })
// the JavaScript helpers are not emitted by tsc: they sit beside the emitted runners
for (const file of helpers.filter((file) => file.endsWith(".mjs"))) {
  fs.copyFileSync(path.join(runnersDir, file), path.join(app, "out", file))
}

// ── 3. run from dist ─────────────────────────────────────────────────────────────────────────────
for (const name of runners) {
  step(`run ${name}`)
  run(process.execPath, [path.join("out", `${name}.js`)], {
    cwd: app,
    timeoutSeconds: 120,
    env: { AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true" }
  })
}

step(`passed: ${runners.length} runners, ${snippets.size} snippets`)
