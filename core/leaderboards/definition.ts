/**
 * Leaderboard definitions: their shape (docs/leaderboards.md), semantic validation beyond the JSON
 * Schema (time zones, expressions, conditions), and compilation into a scorer used by the pipeline.
 */
import { compileExpression, readField, type Compiled, type Condition, type EventView } from '../expressions';
import {
  compile,
  eventTypeMatcher,
  fromFilters,
  fromPathMap,
  validateFilters,
  validatePathMap,
  type CompiledCondition,
  type FieldFilter,
} from '../rules/rules';
import { validateTimeframe, type Timeframe } from '../windows';

export type Aggregation = 'sum' | 'count' | 'max' | 'min' | 'avg';
export type RankPolicy = 'unique' | 'shared' | 'dense';
export type LeaderboardStatus = 'active' | 'inactive' | 'archived';

export interface ScoringRule {
  event_type: string;
  conditions?: Condition;
  points_expression?: string;
}

/** `{field, op, value}`: a bare name is not an attribute here (core/rules: `bareNames: 'as_is'`). */
export type ScopeFilter = FieldFilter;

export interface LeaderboardConfig {
  timeframe: Timeframe & { grace_seconds?: number };
  scoring: { rules: ScoringRule[]; aggregation: Aggregation };
  scope?: { filters?: ScopeFilter[] };
  ranking?: { size?: number; min_score?: number; rank_policy?: RankPolicy };
}

export interface Leaderboard {
  tenant_id: string;
  leaderboard_id: string;
  name: string;
  description: string | null;
  reward_config_id: string | null;
  status: LeaderboardStatus;
  config: LeaderboardConfig;
  version: number;
  created_at: string;
  updated_at: string;
}

export const DEFAULT_GRACE_SECONDS = 60;
export const DEFAULT_RANKING_SIZE = 1000;

export function graceMs(c: LeaderboardConfig): number {
  return (c.timeframe.grace_seconds ?? DEFAULT_GRACE_SECONDS) * 1000;
}
export function rankPolicy(c: LeaderboardConfig): RankPolicy {
  return c.ranking?.rank_policy ?? 'unique';
}
export function rankingSize(c: LeaderboardConfig): number {
  return c.ranking?.size ?? DEFAULT_RANKING_SIZE;
}

/** Checks what the JSON Schema cannot: returns a message naming the field, or null. */
export function validateConfig(c: LeaderboardConfig): string | null {
  const { grace_seconds: _g, ...tf } = c.timeframe;
  const tfError = validateTimeframe(tf);
  if (tfError) return tfError.startsWith('config.') ? tfError : `config.timeframe: ${tfError}`;
  for (const [i, rule] of c.scoring.rules.entries()) {
    const where = `config.scoring.rules[${i}]`;
    if (rule.points_expression === undefined && c.scoring.aggregation !== 'count') {
      return `${where}.points_expression is required unless the aggregation is count`;
    }
    if (rule.points_expression !== undefined) {
      const compiled = compileExpression(rule.points_expression);
      if (!compiled.ok) return `${where}.points_expression: ${compiled.error}`;
    }
    if (rule.conditions !== undefined) {
      const err = validatePathMap(rule.conditions, `${where}.conditions`);
      if (err) return err;
    }
  }
  return validateFilters(c.scope?.filters, 'config.scope.filters');
}

export interface Scorer {
  board: Leaderboard;
  /** Points of an event for this board: null when the event does not count (no rule, filtered out, missing field). */
  points(e: EventView): number | null;
}

/** Compiles a (validated) definition into a scorer (core/rules: one condition form, one type matcher). */
export function compileScorer(board: Leaderboard): Scorer {
  const { scoring, scope } = board.config;
  const rules = scoring.rules.map((r) => ({
    type: eventTypeMatcher(r.event_type),
    conditions: compile(fromPathMap(r.conditions)),
    expr:
      r.points_expression === undefined
        ? null
        : (compileExpression(r.points_expression) as { ok: true; fn: Compiled }).fn,
  }));
  const filters: CompiledCondition | undefined = scope?.filters?.length
    ? compile(fromFilters(scope.filters))
    : undefined;
  const counting = scoring.aggregation === 'count';
  return {
    board,
    points(e) {
      if (filters && !filters.test(e)) return null;
      // The first rule whose event type and conditions match scores the event.
      const rule = rules.find((r) => r.type(e.type) && r.conditions.test(e));
      if (!rule) return null;
      if (counting) return 1;
      return rule.expr ? rule.expr(e) : null;
    },
  };
}

/** An event record's view for expressions and conditions. */
export function eventView(r: {
  tenant_id: string;
  event_id: string;
  type: string;
  user_id: string;
  occurred_at: number;
  attrs_json: string;
  actor_metadata_json: string | null;
  subject_json: string | null;
}): EventView {
  return {
    type: r.type,
    user_id: r.user_id,
    event_id: r.event_id,
    occurred_at: r.occurred_at,
    attrs: JSON.parse(r.attrs_json) as Record<string, unknown>,
    subject: r.subject_json ? (JSON.parse(r.subject_json) as Record<string, unknown>) : null,
    actor_metadata: r.actor_metadata_json
      ? (JSON.parse(r.actor_metadata_json) as Record<string, unknown>)
      : null,
  };
}

export { readField };
