/**
 * `bench/results.svg`: every contender's throughput and CPU per call on each path of each suite,
 * as horizontal bars, so the comparison reads at a glance. Plain SVG, written by hand: no
 * dependency, and it renders on GitHub.
 */
import type { SuiteResult } from "./Suite.js"

/** One suite to draw: its title and its result. */
export interface ChartSuite {
  readonly title: string
  readonly result: SuiteResult
}

const PALETTE = ["#2563eb", "#ea580c", "#6b7280", "#16a34a", "#9333ea", "#0891b2", "#ca8a04"]

const WIDTH = 980
const LABEL = 200
const BAR = 300
const GAP = 80
const ROW = 14
const PATH_HEADER = 18
const SUITE_HEADER = 44

const escape = (s: string) => s.replaceAll("&", "&amp;").replaceAll("<", "&lt;").replaceAll(">", "&gt;")
const count = (n: number) => Number.isFinite(n) ? Math.round(n).toLocaleString("en-US") : "n/a"

/** The SVG of the suites. */
export const svg = (suites: ReadonlyArray<ChartSuite>, caption: string): string => {
  const parts: Array<string> = []
  let y = 40
  const throughputX = LABEL
  const cpuX = LABEL + BAR + GAP
  for (const { result, title } of suites) {
    const names = Object.keys(result.scenarios[0]?.contenders ?? {})
    parts.push(`<text x="0" y="${y + 16}" class="suite">${escape(title)}</text>`)
    parts.push(`<text x="${throughputX}" y="${y + 36}" class="head">calls/s (median; longer is better)</text>`)
    parts.push(`<text x="${cpuX}" y="${y + 36}" class="head">CPU µs per call (shorter is better)</text>`)
    y += SUITE_HEADER
    for (const scenario of result.scenarios) {
      const values = names.map((name) => scenario.contenders[name]!)
      const maxThroughput = Math.max(...values.map((c) => c.throughput))
      const maxCpu = Math.max(...values.map((c) => c.cpuPerCall))
      parts.push(`<text x="0" y="${y + 12}" class="path">${scenario.path} c${scenario.concurrency}</text>`)
      y += PATH_HEADER
      names.forEach((name, i) => {
        const c = scenario.contenders[name]!
        const color = PALETTE[i % PALETTE.length]!
        const tw = maxThroughput > 0 ? (c.throughput / maxThroughput) * BAR : 0
        const cw = maxCpu > 0 ? (c.cpuPerCall / maxCpu) * BAR : 0
        parts.push(
          `<text x="${LABEL - 6}" y="${y + 10}" class="name" text-anchor="end">${escape(name)}</text>`,
          `<rect x="${throughputX}" y="${y + 1}" width="${tw.toFixed(1)}" height="${ROW - 3}" fill="${color}"/>`,
          `<text x="${(throughputX + tw + 4).toFixed(1)}" y="${y + 10}" class="value">${count(c.throughput)}</text>`,
          `<rect x="${cpuX}" y="${y + 1}" width="${cw.toFixed(1)}" height="${ROW - 3}" fill="${color}" ` +
            `fill-opacity="0.55"/>`,
          `<text x="${(cpuX + cw + 4).toFixed(1)}" y="${y + 10}" class="value">${count(c.cpuPerCall)}</text>`
        )
        y += ROW
      })
      y += 6
    }
    y += 14
  }
  const height = y + 10
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" ` +
    `font-family="Helvetica, Arial, sans-serif">
<style>
  .title { font-size: 15px; font-weight: bold; }
  .caption { font-size: 11px; fill: #555; }
  .suite { font-size: 14px; font-weight: bold; }
  .head { font-size: 11px; fill: #333; }
  .path { font-size: 11px; font-weight: bold; fill: #333; }
  .name { font-size: 10px; fill: #222; }
  .value { font-size: 10px; fill: #222; }
</style>
<rect width="100%" height="100%" fill="#ffffff"/>
<text x="0" y="16" class="title">Idempotent calls per second and CPU per call, by contender and path</text>
<text x="0" y="32" class="caption">${escape(caption)}</text>
${parts.join("\n")}
</svg>
`
}
