// A processor file that does nothing: what running a job in a thread or child costs.
module.exports = async () => null
