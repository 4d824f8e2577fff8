/**
 * Wheel themes (SPEC.md "Spin wheel": theme config): a tenant's own themes (rows of wheel_themes),
 * the system templates (below, in code, the same for every tenant), and the resolved theme of a
 * wheel: its base theme (its `theme_id`, else the default template) with the wheel's
 * `theme_overrides` deep-merged over it, `segment_overrides` merged by segment index.
 */
import type { Queryable } from '../../adapters/sql/types';
import type { Random } from '../random';

export interface ThemeConfig {
  wheel: {
    background_color: string;
    border_color: string;
    border_width: number;
    center_color: string;
    center_radius: number;
  };
  segments: {
    default_color: string;
    text_color: string;
    text_font_size: number;
    border_color: string;
    border_width: number;
  };
  /** By segment index ("0", "1", ...). */
  segment_overrides: Record<string, { color?: string; text_color?: string }>;
}

/** A theme config as a request gives it: `segment_overrides` may be left out. */
export type ThemeConfigInput = Omit<ThemeConfig, 'segment_overrides'> & {
  segment_overrides?: ThemeConfig['segment_overrides'];
};

/** A partial theme config, as a wheel's `theme_overrides` gives it. */
export interface ThemeOverrides {
  wheel?: Partial<ThemeConfig['wheel']>;
  segments?: Partial<ThemeConfig['segments']>;
  segment_overrides?: ThemeConfig['segment_overrides'];
}

export type ThemeType = 'template' | 'custom';
export type ThemeStatus = 'active' | 'archived';

export interface Theme {
  id: string;
  /** Null for a system template. */
  tenant_id: string | null;
  name: string;
  description: string | null;
  theme_type: ThemeType;
  status: ThemeStatus;
  config: ThemeConfig;
  created_at: string;
  updated_at: string;
}

export interface ResolvedTheme {
  theme_id: string;
  theme_name: string;
  wheel: ThemeConfig['wheel'];
  segments: ThemeConfig['segments'];
  segment_overrides: ThemeConfig['segment_overrides'];
  /** The colours each segment of the wheel is drawn with, after every override. */
  per_segment: Array<{ index: number; color: string; text_color: string }>;
}

const SYSTEM_TIME = '2026-01-01T00:00:00.000Z';

const palette = (colors: string[], text: string[]) =>
  Object.fromEntries(colors.map((c, i) => [String(i), { color: c, text_color: text[i % text.length]! }]));

const template = (id: string, name: string, description: string, config: ThemeConfig): Theme => ({
  id,
  tenant_id: null,
  name,
  description,
  theme_type: 'template',
  status: 'active',
  config,
  created_at: SYSTEM_TIME,
  updated_at: SYSTEM_TIME,
});

/**
 * The system templates: fixed ids (a wheel's `theme_id` may name one), alternating palettes over
 * the first eight segments (a wheel with more repeats `segments.default_color`), text colours
 * chosen for contrast with each segment colour.
 */
export const SYSTEM_TEMPLATES: readonly Theme[] = [
  template(
    '5b0e2c1a-0001-4a00-8000-000000000001',
    'Classic carnival',
    'Red and gold on a white rim: the fairground wheel. The default of a wheel without a theme.',
    {
      wheel: {
        background_color: '#ffffff',
        border_color: '#b8860b',
        border_width: 8,
        center_color: '#b8860b',
        center_radius: 40,
      },
      segments: {
        default_color: '#d62828',
        text_color: '#ffffff',
        text_font_size: 16,
        border_color: '#ffffff',
        border_width: 2,
      },
      segment_overrides: palette(
        ['#d62828', '#fcbf49', '#d62828', '#fcbf49', '#d62828', '#fcbf49', '#d62828', '#fcbf49'],
        ['#ffffff', '#1d1d1d'],
      ),
    },
  ),
  template(
    '5b0e2c1a-0002-4a00-8000-000000000002',
    'Midnight neon',
    'Dark navy with neon segments, for dark interfaces.',
    {
      wheel: {
        background_color: '#0b1026',
        border_color: '#00e5ff',
        border_width: 6,
        center_color: '#141a3a',
        center_radius: 36,
      },
      segments: {
        default_color: '#1f2a5c',
        text_color: '#e6f7ff',
        text_font_size: 15,
        border_color: '#00e5ff',
        border_width: 1,
      },
      segment_overrides: palette(
        ['#7b2ff7', '#1f2a5c', '#f107a3', '#1f2a5c', '#00b4d8', '#1f2a5c', '#39ff14', '#1f2a5c'],
        ['#ffffff', '#e6f7ff', '#ffffff', '#e6f7ff', '#0b1026', '#e6f7ff', '#0b1026', '#e6f7ff'],
      ),
    },
  ),
  template(
    '5b0e2c1a-0003-4a00-8000-000000000003',
    'Soft pastel',
    'Light pastel segments with dark text, for light interfaces.',
    {
      wheel: {
        background_color: '#fdf6ec',
        border_color: '#e0c3a8',
        border_width: 4,
        center_color: '#ffffff',
        center_radius: 32,
      },
      segments: {
        default_color: '#ffd6e0',
        text_color: '#3d3d3d',
        text_font_size: 14,
        border_color: '#ffffff',
        border_width: 2,
      },
      segment_overrides: palette(
        ['#ffd6e0', '#c1e1c1', '#cde7f0', '#fff1b6', '#e3d5f5', '#ffdcc1', '#d4f0f0', '#f7d6e0'],
        ['#3d3d3d'],
      ),
    },
  ),
  template(
    '5b0e2c1a-0004-4a00-8000-000000000004',
    'High contrast',
    'Black, white and yellow with large text: WCAG AAA contrast on every segment.',
    {
      wheel: {
        background_color: '#000000',
        border_color: '#ffffff',
        border_width: 6,
        center_color: '#ffffff',
        center_radius: 40,
      },
      segments: {
        default_color: '#000000',
        text_color: '#ffffff',
        text_font_size: 20,
        border_color: '#ffffff',
        border_width: 3,
      },
      segment_overrides: palette(
        ['#000000', '#ffd500', '#000000', '#ffffff', '#000000', '#ffd500', '#000000', '#ffffff'],
        ['#ffffff', '#000000'],
      ),
    },
  ),
];

/** The base of a wheel without a theme. */
export const DEFAULT_TEMPLATE = SYSTEM_TEMPLATES[0]!;

const isPlain = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** `over` merged into `base`: objects key by key, recursively; anything else replaces. */
export function deepMerge<T>(base: T, over: unknown): T {
  if (!isPlain(base) || !isPlain(over)) return (over === undefined ? base : over) as T;
  const out: Record<string, unknown> = { ...base };
  for (const [k, v] of Object.entries(over)) {
    if (v === undefined) continue;
    out[k] = k in out ? deepMerge(out[k], v) : v;
  }
  return out as T;
}

/** The theme a wheel is drawn with (docs/wheels.md "Themes"). */
export function resolveTheme(
  base: Pick<Theme, 'id' | 'name' | 'config'>,
  overrides: ThemeOverrides | null | undefined,
  segmentCount: number,
): ResolvedTheme {
  const c = deepMerge<ThemeConfig>(
    { ...base.config, segment_overrides: base.config.segment_overrides ?? {} },
    overrides ?? {},
  );
  const per_segment = Array.from({ length: segmentCount }, (_, index) => {
    const o = c.segment_overrides[String(index)] ?? {};
    return {
      index,
      color: o.color ?? c.segments.default_color,
      text_color: o.text_color ?? c.segments.text_color,
    };
  });
  return {
    theme_id: base.id,
    theme_name: base.name,
    wheel: c.wheel,
    segments: c.segments,
    segment_overrides: c.segment_overrides,
    per_segment,
  };
}

interface Row {
  tenant_id: string;
  id: string;
  name: string;
  description: string | null;
  theme_type: ThemeType;
  status: ThemeStatus;
  config: ThemeConfig;
  created_at: string | Date;
  updated_at: string | Date;
}

const toTheme = (r: Row): Theme => ({
  id: r.id,
  tenant_id: r.tenant_id,
  name: r.name,
  description: r.description,
  theme_type: r.theme_type,
  status: r.status,
  config: r.config,
  created_at: new Date(r.created_at).toISOString(),
  updated_at: new Date(r.updated_at).toISOString(),
});

export async function createTheme(
  q: Queryable,
  random: Random,
  tenantId: string,
  b: {
    name: string;
    description?: string | null;
    theme_type: ThemeType;
    status: ThemeStatus;
    config: ThemeConfigInput;
  },
  now: number,
): Promise<Theme> {
  const at = new Date(now).toISOString();
  const r = await q.query<Row>(
    `INSERT INTO wheel_themes (tenant_id, id, name, description, theme_type, status, config, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8) RETURNING *`,
    [
      tenantId,
      random.uuid(),
      b.name,
      b.description ?? null,
      b.theme_type,
      b.status,
      JSON.stringify({ ...b.config, segment_overrides: b.config.segment_overrides ?? {} }),
      at,
    ],
  );
  return toTheme(r.rows[0]!);
}

export async function updateTheme(
  q: Queryable,
  tenantId: string,
  id: string,
  p: {
    name?: string;
    description?: string | null;
    theme_type?: ThemeType;
    status?: ThemeStatus;
    config?: ThemeConfigInput;
  },
  now: number,
): Promise<Theme | null> {
  const r = await q.query<Row>(
    `UPDATE wheel_themes SET name = COALESCE($3, name), description = CASE WHEN $4::boolean THEN $5 ELSE description END,
       theme_type = COALESCE($6, theme_type), status = COALESCE($7, status), config = COALESCE($8::jsonb, config), updated_at = $9
     WHERE tenant_id = $1 AND id = $2 RETURNING *`,
    [
      tenantId,
      id,
      p.name ?? null,
      p.description !== undefined,
      p.description ?? null,
      p.theme_type ?? null,
      p.status ?? null,
      p.config ? JSON.stringify({ ...p.config, segment_overrides: p.config.segment_overrides ?? {} }) : null,
      new Date(now).toISOString(),
    ],
  );
  return r.rows[0] ? toTheme(r.rows[0]) : null;
}

export async function listThemes(
  q: Queryable,
  tenantId: string,
  f: { theme_type?: ThemeType; status?: ThemeStatus; limit: number; offset: number },
): Promise<{ themes: Theme[]; total: number }> {
  const where =
    'tenant_id = $1 AND ($2::text IS NULL OR theme_type = $2) AND ($3::text IS NULL OR status = $3)';
  const params = [tenantId, f.theme_type ?? null, f.status ?? null];
  const total = await q.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM wheel_themes WHERE ${where}`,
    params,
  );
  const r = await q.query<Row>(
    `SELECT * FROM wheel_themes WHERE ${where} ORDER BY created_at, id LIMIT $4 OFFSET $5`,
    [...params, f.limit, f.offset],
  );
  return { themes: r.rows.map(toTheme), total: total.rows[0]?.n ?? 0 };
}

/** A theme of the tenant or a system template, by id; null when neither. */
export async function getTheme(q: Queryable, tenantId: string, id: string): Promise<Theme | null> {
  const system = SYSTEM_TEMPLATES.find((t) => t.id === id);
  if (system) return system;
  const r = await q.query<Row>('SELECT * FROM wheel_themes WHERE tenant_id = $1 AND id = $2', [tenantId, id]);
  return r.rows[0] ? toTheme(r.rows[0]) : null;
}

/** Themes by id (tenant's and system templates) for resolving many wheels at once. */
export async function getThemes(q: Queryable, tenantId: string, ids: string[]): Promise<Map<string, Theme>> {
  const out = new Map<string, Theme>();
  const rest: string[] = [];
  for (const id of new Set(ids)) {
    const system = SYSTEM_TEMPLATES.find((t) => t.id === id);
    if (system) out.set(id, system);
    else rest.push(id);
  }
  if (rest.length) {
    const r = await q.query<Row>('SELECT * FROM wheel_themes WHERE tenant_id = $1 AND id = ANY($2::text[])', [
      tenantId,
      rest,
    ]);
    for (const x of r.rows) out.set(x.id, toTheme(x));
  }
  return out;
}
