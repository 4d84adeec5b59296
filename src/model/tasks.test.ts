import { describe, expect, it } from 'vitest';
import { jimengModel, klingModel, midjourneyModel, sunoModel } from './tasks.js';

const JSON_CT = 'application/json';
const b = (o: unknown) => Buffer.from(JSON.stringify(o));

describe('midjourneyModel: mj_ and the action (new-api service/midjourney.go)', () => {
  it.each([
    ['/mj/submit/imagine', 'mj_imagine'],
    ['/fast/mj/submit/imagine', 'mj_imagine'],
    ['/mj/submit/describe', 'mj_describe'],
    ['/mj/submit/blend', 'mj_blend'],
    ['/mj/submit/shorten', 'mj_shorten'],
    ['/mj/submit/modal', 'mj_modal'],
    ['/mj/submit/video', 'mj_video'],
    ['/mj/submit/edits', 'mj_edits'],
    ['/mj/insight-face/swap', 'swap_face'],
    ['/mj/submit/upload-discord-images', 'mj_upload'],
  ])('%s → %s', (path, model) => {
    expect(midjourneyModel(path, JSON_CT, b({ prompt: 'x' }))).toEqual({ ok: true, model });
  });

  it('change and simple-change take the body action, lower-cased (a client can choose it)', () => {
    expect(midjourneyModel('/mj/submit/change', JSON_CT, b({ action: 'UPSCALE', taskId: '1' }))).toEqual({ ok: true, model: 'mj_upscale' });
    expect(midjourneyModel('/mj/submit/simple-change', JSON_CT, b({ Action: 'X-FREE' }))).toEqual({ ok: true, model: 'mj_x-free' });
  });

  it('action buttons read the custom id', () => {
    expect(midjourneyModel('/mj/submit/action', JSON_CT, b({ customId: 'MJ::JOB::upsample::2::abc' }))).toEqual({ ok: true, model: 'mj_upscale' });
    expect(midjourneyModel('/mj/submit/action', JSON_CT, b({ customId: 'MJ::JOB::reroll::0::abc' }))).toEqual({ ok: true, model: 'mj_reroll' });
    expect(midjourneyModel('/mj/submit/action', JSON_CT, b({ customId: 'MJ::Outpaint::50::abc' }))).toEqual({ ok: true, model: 'mj_zoom' });
    expect(midjourneyModel('/mj/submit/action', JSON_CT, b({ customId: 'MJ::JOB::vary_variation::1', action: 'X-free' }))).toEqual({ ok: true, model: 'mj_x-free' });
    expect(midjourneyModel('/mj/submit/action', JSON_CT, b({ customId: 'garbage' }))).toEqual({ ok: true, model: null });
  });

  it('fetches select no model; a body it cannot read is refused', () => {
    expect(midjourneyModel('/mj/task/list-by-condition', JSON_CT, b({}))).toEqual({ ok: true, model: null });
    expect(midjourneyModel('/mj/submit/change', JSON_CT, Buffer.from('{"action":'))).toMatchObject({ ok: false, problem: 'invalid' });
  });
});

describe('sunoModel', () => {
  it('is suno_ and the action of /suno/submit/{action}; none for fetches', () => {
    expect(sunoModel('POST', '/suno/submit/MUSIC')).toBe('suno_music');
    expect(sunoModel('POST', '/suno/fetch')).toBeNull();
    expect(sunoModel('POST', '/suno/submit/a/b')).toBeNull();
    expect(sunoModel('POST', '/v1beta/models/x/suno/submit/y')).toBe('suno_');
  });
});

describe('klingModel and jimengModel: the adapter and the distributor must agree', () => {
  it('Kling: model_name, else model; refused when it differs from the model the relay routes on', () => {
    expect(klingModel(JSON_CT, b({ model_name: 'kling-v1-free' }), undefined)).toEqual({ ok: true, model: 'kling-v1-free' });
    expect(klingModel(JSON_CT, b({ model: 'kling-v1' }), undefined)).toEqual({ ok: true, model: 'kling-v1' });
    expect(klingModel(JSON_CT, b({ model_name: 'kling-v1-free', model: 'kling-v1-free' }), undefined)).toEqual({ ok: true, model: 'kling-v1-free' });
    expect(klingModel(JSON_CT, b({ model_name: 'kling-v1-free', model: 'kling-v1' }), undefined)).toMatchObject({ ok: false, problem: 'invalid' });
  });

  it('Jimeng: req_key; a result fetch or a missing Action selects none', () => {
    expect(jimengModel(JSON_CT, b({ req_key: 'jimeng-free' }), undefined, 'Action=CVSync2AsyncSubmitTask&Version=2022-08-31')).toEqual({ ok: true, model: 'jimeng-free' });
    expect(jimengModel(JSON_CT, b({ req_key: 'jimeng-free', model: 'other' }), undefined, 'Action=CVSync2AsyncSubmitTask')).toMatchObject({ ok: false, problem: 'invalid' });
    expect(jimengModel(JSON_CT, b({ req_key: 'jimeng-free' }), undefined, 'Action=CVSync2AsyncGetResult')).toEqual({ ok: true, model: null });
    expect(jimengModel(JSON_CT, b({ req_key: 'jimeng-free' }), undefined, '')).toEqual({ ok: true, model: null });
  });
});
