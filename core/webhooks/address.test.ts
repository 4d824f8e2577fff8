import { AddressRefused, checkAddress, checkedAddresses, checkUrl } from './address';

describe('checkUrl refuses hostile webhook URLs', () => {
  const refused: Array<[string, RegExp]> = [
    ['http://127.0.0.1/hook', /127\.0\.0\.1 is a loopback address/],
    ['http://127.0.0.1:6379/', /loopback/],
    ['http://127.255.255.254:8080/x', /loopback/],
    ['http://[::1]/', /::1 is a loopback address/],
    ['http://[::1]:9000/', /loopback/],
    ['http://[::ffff:127.0.0.1]/', /maps 127\.0\.0\.1 is a loopback address/],
    ['http://[::ffff:7f00:1]/', /loopback/],
    ['http://[::ffff:10.0.0.1]/', /private/],
    ['http://[::127.0.0.1]/', /not a global unicast/],
    ['http://[::]/', /unspecified/],
    ['http://10.0.0.1/', /private/],
    ['http://10.255.255.255/', /private/],
    ['http://172.16.0.1/', /private/],
    ['http://172.31.255.255/', /private/],
    ['http://192.168.1.1/', /private/],
    ['http://169.254.169.254/latest/meta-data/', /link-local/],
    ['http://100.64.0.1/', /carrier-grade NAT/],
    ['http://0.0.0.0/', /this network/],
    ['http://0/', /this network/],
    ['http://224.0.0.1/', /multicast/],
    ['http://255.255.255.255/', /broadcast/],
    ['http://198.18.0.1/', /benchmarking/],
    ['http://192.0.2.10/', /documentation/],
    ['http://[fe80::1]/', /link-local/],
    ['http://[fc00::1]/', /unique local/],
    ['http://[fd12:3456::1]/', /unique local/],
    ['http://[ff02::1]/', /multicast/],
    ['http://[64:ff9b::7f00:1]/', /not a global unicast/],
    ['http://[2002:7f00:1::1]/', /6to4/],
    ['http://[2001:0:4136:e378::1]/', /Teredo/],
    ['http://[2001:db8::1]/', /documentation/],
    // Numeric host forms: the URL parser normalises them to dotted IPv4 first.
    ['http://2130706433/', /127\.0\.0\.1 is a loopback/],
    ['http://0x7f000001/', /127\.0\.0\.1 is a loopback/],
    ['http://0x7f.0.0.1/', /127\.0\.0\.1 is a loopback/],
    ['http://0177.0.0.1/', /127\.0\.0\.1 is a loopback/],
    ['http://017700000001/', /127\.0\.0\.1 is a loopback/],
    ['http://127.1/', /127\.0\.0\.1 is a loopback/],
    ['http://3232235777/', /192\.168\.1\.1 is a private/],
    ['http://0xa9fea9fe/', /169\.254\.169\.254 is a link-local/],
    // Local names.
    ['http://localhost/', /loopback name/],
    ['http://LOCALHOST:8080/', /loopback name/],
    ['http://localhost./', /loopback name/],
    ['http://api.localhost/', /loopback name/],
    // Credentials and userinfo tricks.
    ['http://evil@127.0.0.1/', /credentials/],
    ['http://user:pass@example.com/', /credentials/],
    ['http://example.com@127.0.0.1/', /credentials/],
    // Schemes and shapes.
    ['ftp://example.com/', /http or https/],
    ['file:///etc/passwd', /http or https/],
    ['gopher://example.com/', /http or https/],
    ['javascript:alert(1)', /http or https/],
    ['//example.com/', /not a valid absolute URL/],
    ['http://', /not a valid absolute URL/],
    ['http://example.com:99999/', /not a valid absolute URL/],
    [`https://example.com/${'a'.repeat(2100)}`, /longer than 2048/],
  ];
  it.each(refused)('refuses %s', (url, reason) => {
    const v = checkUrl(url, false);
    expect(v.ok).toBe(false);
    if (!v.ok) expect(v.reason).toMatch(reason);
  });

  it('names the setting that allows private addresses', () => {
    const v = checkUrl('http://10.1.2.3/', false);
    expect(!v.ok && v.reason).toMatch(/LUDUS_WEBHOOK_ALLOW_PRIVATE=true/);
  });

  const allowed = [
    'https://hooks.example.com/ludus',
    'http://example.com:8080/x?y=1',
    'https://93.184.215.14/hook',
    'https://[2606:4700::6810:85e5]/hook',
    'http://[::ffff:93.184.215.14]/',
    'https://172.32.0.1/',
    'https://192.169.0.1/',
  ];
  it.each(allowed)('allows %s', (url) => {
    expect(checkUrl(url, false).ok).toBe(true);
  });

  it('allows private and loopback addresses only when the operator says so', () => {
    for (const url of ['http://127.0.0.1:8080/', 'http://[::1]/', 'http://localhost/', 'http://10.0.0.1/']) {
      expect(checkUrl(url, true).ok).toBe(true);
    }
    // The scheme and credential rules still hold.
    expect(checkUrl('ftp://127.0.0.1/', true).ok).toBe(false);
    expect(checkUrl('http://u@127.0.0.1/', true).ok).toBe(false);
  });

  it('reports IP literals without brackets, so delivery can skip DNS for them', () => {
    expect(checkUrl('http://[2606:4700::1]:81/', false)).toMatchObject({
      ok: true,
      hostname: '2606:4700::1',
      ip: true,
    });
    expect(checkUrl('https://Hooks.Example.com./x', false)).toMatchObject({
      ok: true,
      hostname: 'hooks.example.com',
      ip: false,
    });
  });
});

describe('checkAddress', () => {
  it('refuses non-addresses', () => {
    expect(checkAddress('example.com', false).ok).toBe(false);
    expect(checkAddress('127.0.0.1.1', true).ok).toBe(false);
  });
  it('knows the edges of each range', () => {
    expect(checkAddress('172.15.255.255', false).ok).toBe(true);
    expect(checkAddress('172.32.0.0', false).ok).toBe(true);
    expect(checkAddress('100.63.255.255', false).ok).toBe(true);
    expect(checkAddress('100.128.0.0', false).ok).toBe(true);
    expect(checkAddress('223.255.255.255', false).ok).toBe(true);
    expect(checkAddress('1.1.1.1', false).ok).toBe(true);
  });
});

describe('checkedAddresses (delivery time: every resolved address is checked)', () => {
  const resolver = (answers: Record<string, string[]>) => async (host: string) =>
    (answers[host] ?? []).map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));

  it('refuses a name that resolves to a loopback address (DNS rebinding)', async () => {
    const r = resolver({ 'rebind.example': ['127.0.0.1'] });
    await expect(checkedAddresses('rebind.example', false, r)).rejects.toThrow(
      /rebind\.example resolves to 127\.0\.0\.1 is a loopback address/,
    );
  });

  it('refuses a name with any private answer among public ones', async () => {
    const r = resolver({ 'mixed.example': ['93.184.215.14', '10.0.0.5'] });
    await expect(checkedAddresses('mixed.example', false, r)).rejects.toBeInstanceOf(AddressRefused);
  });

  it('refuses metadata and mapped addresses behind a name', async () => {
    const r = resolver({ a: ['169.254.169.254'], b: ['::ffff:127.0.0.1'], c: ['fe80::1'] });
    for (const host of ['a', 'b', 'c']) await expect(checkedAddresses(host, false, r)).rejects.toThrow();
  });

  it('passes public answers through, and anything when private addresses are allowed', async () => {
    const r = resolver({ ok: ['93.184.215.14', '2606:4700::6810:85e5'], lo: ['127.0.0.1'] });
    await expect(checkedAddresses('ok', false, r)).resolves.toHaveLength(2);
    await expect(checkedAddresses('lo', true, r)).resolves.toEqual([{ address: '127.0.0.1', family: 4 }]);
    await expect(checkedAddresses('none', true, r)).rejects.toThrow(/did not resolve/);
  });
});
