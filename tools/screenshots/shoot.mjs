// Screenshots an HTML page with Debian's Chromium through playwright-core:
// node shoot.mjs PAGE.html OUT.png [MAX_HEIGHT]
import { chromium } from 'playwright-core';

const [page, out, maxHeight] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
const p = await browser.newPage({ viewport: { width: 912, height: 800 }, deviceScaleFactor: 1 });
await p.goto('file://' + page);
const box = await p.locator('.comment').boundingBox();
const height = Math.min(Math.ceil(box.height) + 32, Number(maxHeight || 100000));
await p.screenshot({ path: out, fullPage: true, clip: { x: 0, y: 0, width: 912, height } });
await browser.close();
