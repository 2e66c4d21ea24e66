// The Courier Mini App: a form that builds a command line and hands it to Telegram (sendData).
// Static, with no request anywhere: what it shows comes in the URL's fragment (bot/miniapp.py), its
// answer goes back through Telegram as the documented Mini App event "web_app_data_send". The bot
// checks the line as if typed, so the ranges here only help; they prove nothing.

const params = new URLSearchParams(location.hash.slice(1));

/** Telegram's documented way for a Mini App to talk to its client (mobile, desktop and web). */
function postEvent(eventType, eventData) {
  if (window.TelegramWebviewProxy) {
    window.TelegramWebviewProxy.postEvent(eventType, JSON.stringify(eventData));
  } else if (window.external && 'notify' in window.external) {
    window.external.notify(JSON.stringify({ eventType, eventData }));
  } else {
    window.parent.postMessage(JSON.stringify({ eventType, eventData }), '*');
  }
}

function applyTheme() {
  let theme = {};
  try { theme = JSON.parse(params.get('tgWebAppThemeParams') || '{}'); } catch { /* no theme: the light one */ }
  const root = document.documentElement.style;
  const vars = { bg_color: '--bg', text_color: '--text', hint_color: '--hint', secondary_bg_color: '--field',
    button_color: '--button', button_text_color: '--button-text' };
  for (const [key, name] of Object.entries(vars)) if (/^#[0-9a-f]{3,8}$/i.test(theme[key] || '')) root.setProperty(name, theme[key]);
  if (theme.bg_color && parseInt(theme.bg_color.slice(1, 3), 16) < 128) document.documentElement.classList.add('dark');
}

async function payload() {
  const [version, packed] = (params.get('courier') || '').split('.');
  if (version !== '1' || !packed) return { words: {} };
  const bytes = Uint8Array.from(atob(packed.replace(/-/g, '+').replace(/_/g, '/')), (c) => c.charCodeAt(0));
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('deflate-raw'));
  return JSON.parse(await new Response(stream).text());
}

function el(tag, attrs = {}, children = []) {
  const node = Object.assign(document.createElement(tag), attrs);
  node.append(...children);
  return node;
}

function field(label, input) { return [el('label', { htmlFor: input.id, textContent: label }), input]; }

function choices(id, names, words) {
  return el('select', { id }, [el('option', { value: '', textContent: words.default }),
    ...names.map((name) => el('option', { value: name, textContent: name }))]);
}

function number(id, option, step = 1) {
  const attrs = { id, type: 'number', step, inputMode: step === 1 ? 'numeric' : 'decimal' };
  if (option && option.low !== undefined) Object.assign(attrs, { min: option.low, max: option.high });
  return el('input', attrs);
}

/** The fields of one command: prompt, and each option it offers, with its ranges. */
function fieldsOf(command, data) {
  const words = data.words;
  const offered = Object.fromEntries(command.options.map((option) => [option.name, option]));
  const parts = [...field(words.prompt, el('textarea', { id: 'prompt' }))];
  if (offered.model) parts.push(...field(words.model, choices('model', data.checkpoints || [], words)));
  if (offered.lora) {
    parts.push(el('label', { htmlFor: 'lora', textContent: words.lora }),
      el('div', { className: 'row' }, [choices('lora', data.loras || [], words),
        Object.assign(number('lora-weight', { low: data.weights[0], high: data.weights[1] }, 0.05), { value: 1, title: words.weight })]));
  }
  if (offered.size) {
    parts.push(...field(words.size, number('size', offered.size, 8)));
    parts.push(...field(words.ar, el('select', { id: 'ar' }, ['', '1:1', '4:3', '3:4', '16:9', '9:16', '21:9', '9:21']
      .filter((ratio) => !ratio || Math.max(...ratio.split(':')) / Math.min(...ratio.split(':')) <= command.ar)
      .map((ratio) => el('option', { value: ratio, textContent: ratio || words.default })))));
  }
  if (offered.steps) parts.push(...field(words.steps, number('steps', offered.steps)));
  parts.push(...field(words.seed, number('seed', { low: 0, high: 18446744073709551615 })));
  if (offered.strength) parts.push(...field(words.strength, number('strength', offered.strength, 0.05)));
  if (offered.neg) parts.push(...field(words.neg, el('input', { id: 'neg' })));
  return parts;
}

/** The command line of what the form holds, as a user would type it. */
function commandLine() {
  const value = (id) => (document.getElementById(id)?.value || '').trim();
  const words = [`/${value('command')}`, value('prompt').replace(/\s+/g, ' ')];
  if (value('model')) words.push(`--model ${value('model')}`);
  if (value('lora')) words.push(`--lora ${value('lora')}:${value('lora-weight') || 1}`);
  if (value('ar')) words.push(`--ar ${value('ar')}`);
  else if (value('size')) words.push(`--size ${value('size')}`);
  for (const name of ['steps', 'seed', 'strength']) if (value(name)) words.push(`--${name} ${value(name)}`);
  if (value('neg')) words.push(`--neg ${value('neg')}`);
  return words.filter(Boolean).join(' ');
}

async function main() {
  applyTheme();
  let data;
  try { data = await payload(); } catch { data = { words: {} }; }
  const words = data.words || {};
  document.getElementById('title').textContent = words.title || 'Courier';
  document.getElementById('send').textContent = words.send || 'Send';
  const fields = document.getElementById('fields');
  let line = () => document.getElementById('line').value.trim();
  if (Array.isArray(data.commands) && data.commands.length) {
    const commands = el('select', { id: 'command' }, data.commands.map((c) => el('option', { value: c.name, textContent: `/${c.name}` })));
    const options = el('div');
    const show = () => options.replaceChildren(...fieldsOf(data.commands.find((c) => c.name === commands.value), data));
    commands.addEventListener('change', show);
    fields.append(...field(words.command || 'Command', commands), options);
    show();
    line = commandLine;
  } else {  // the URL could not carry the form (or was cut): the command line as typed
    fields.append(...field(words.line || 'Command line', el('textarea', { id: 'line', value: '/' })));
  }
  const form = document.getElementById('form');
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    postEvent('web_app_data_send', { data: JSON.stringify({ v: 1, line: line() }) });
  });
  form.hidden = false;
  postEvent('web_app_ready', {});
}

main();
