import { sessionOptions } from './pg';

describe('sessionOptions (the settings of every Postgres session)', () => {
  it('sets the planner settings, and the schema when one is asked for', () => {
    expect(sessionOptions({ url: 'postgres://u@db:5432/ludus' })).toEqual({
      connectionString: 'postgres://u@db:5432/ludus',
      options: '-c random_page_cost=1.1',
    });
    expect(sessionOptions({ url: 'postgres://u@db/ludus', schema: 'tenant_a' }).options).toBe(
      '-c random_page_cost=1.1 -c search_path="tenant_a"',
    );
  });

  it("keeps a URL's own options, after Ludus's (so an operator's setting wins), and takes them out of the URL", () => {
    const url =
      'postgres://u:p@db:5432/ludus?sslmode=require&options=-c%20random_page_cost%3D2%20-c%20work_mem%3D64MB';
    const s = sessionOptions({ url, schema: 's1' });
    expect(s.options).toBe(
      '-c random_page_cost=1.1 -c random_page_cost=2 -c work_mem=64MB -c search_path="s1"',
    );
    expect(s.connectionString).toBe('postgres://u:p@db:5432/ludus?sslmode=require');
  });

  it('leaves a connection string that is not a URL as it is', () => {
    expect(sessionOptions({ url: '/var/run/postgresql' })).toEqual({
      connectionString: '/var/run/postgresql',
      options: '-c random_page_cost=1.1',
    });
  });
});
