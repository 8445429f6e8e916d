'use strict'
// `ferroqueue/bull-board`: the bull-board adapter (lib/bull-board.js). Needs @bull-board/api.
module.exports = require('./lib/bull-board')
