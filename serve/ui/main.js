// Loaded last: every page has registered itself by now.
'use strict';

window.awa.start();
