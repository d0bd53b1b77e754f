// Login: exchanges the token for the HttpOnly session cookie (POST /login), then goes
// back to the page that asked for it.
'use strict';

(function (awa) {
  const h = awa.h;

  function next() {
    const n = new URLSearchParams(location.search).get('next') || '/';
    // Only a path of this server: never an absolute URL to elsewhere.
    return n.startsWith('/') && !n.startsWith('//') ? n : '/';
  }

  awa.pages.login = {
    refreshes: false,
    mount(main) {
      main.append(h('h1', null, 'Log in'),
        h('form', {
          id: 'login',
          onsubmit: async (ev) => {
            ev.preventDefault();
            const token = new FormData(ev.target).get('token');
            const res = await fetch('/login', { method: 'POST', credentials: 'same-origin',
              headers: { 'Content-Type': 'application/json' },
              body: JSON.stringify({ token: token }) });
            if (res.ok) {
              location.assign(next());
            } else {
              const body = await res.json().catch(() => ({}));
              awa.showError(body.error || 'HTTP ' + res.status);
            }
          },
        },
        h('label', null, 'Token ', h('input', { name: 'token', type: 'password',
          autocomplete: 'current-password', required: true, size: 40 })),
        h('button', { type: 'submit' }, 'Log in')),
        h('p', { class: 'muted' }, 'The token is the contents of the file given to ',
          h('code', null, 'awa serve --token-file'), '.'));
    },
    async refresh() {},
  };
})(window.awa);
